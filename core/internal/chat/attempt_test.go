package chat

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readBody reads what io.ReadAll reads, whatever size was announced.
func TestReadBody(t *testing.T) {
	body := strings.Repeat(`{"id":"chatcmpl-1","choices":[]}`, 40)
	for _, tc := range []struct {
		name string
		size int64
		r    func() io.Reader
	}{
		{"announced", int64(len(body)), func() io.Reader { return strings.NewReader(body) }},
		{"unknown", -1, func() io.Reader { return strings.NewReader(body) }},
		{"announced short", 10, func() io.Reader { return strings.NewReader(body) }},
		{"announced long", int64(len(body)) * 3, func() io.Reader { return strings.NewReader(body) }},
		{"one byte at a time", int64(len(body)), func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readBody(tc.r(), tc.size)
			require.NoError(t, err)
			assert.Equal(t, body, string(got))
		})
	}
	got, err := readBody(strings.NewReader(""), 0)
	require.NoError(t, err)
	assert.Empty(t, got, "an empty answer")

	boom := errors.New("boom")
	_, err = readBody(iotest.ErrReader(boom), 10)
	assert.ErrorIs(t, err, boom)
	got, err = readBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 3)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, "abc", string(got), "what was read before the error, as io.ReadAll")
}

// An answer longer than maxBody is cut at maxBody, announced or not.
func TestReadBodyCapped(t *testing.T) {
	big := func() io.Reader { return io.LimitReader(zeros{}, maxBody+10) }
	for _, size := range []int64{-1, maxBody + 10, maxBody - 1} {
		got, err := readBody(big(), size)
		require.NoError(t, err)
		assert.Len(t, got, maxBody)
		assert.True(t, bytes.Count(got[:16], []byte{0}) == 16)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
