package openai

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll gives the body as sent, whatever length the request declared
// and however the body arrives (a byte at a time, with the end on the last
// read or on its own).
func TestReadAllWhateverTheDeclaredLength(t *testing.T) {
	body := strings.Repeat(`{"k":"v"}`, 300)
	for _, tc := range []struct {
		name     string
		declared int64
		reader   func(io.Reader) io.Reader
	}{
		{"exact", int64(len(body)), func(r io.Reader) io.Reader { return r }},
		{"exact, a byte at a time", int64(len(body)), iotest.OneByteReader},
		{"exact, end with the data", int64(len(body)), iotest.DataErrReader},
		{"unknown", -1, func(r io.Reader) io.Reader { return r }},
		{"declared short", 10, iotest.HalfReader},
		{"over the presize bound", presizeMax + 1, func(r io.Reader) io.Reader { return r }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			r.Body = io.NopCloser(tc.reader(strings.NewReader(body)))
			r.ContentLength = tc.declared
			got, err := readAll(r)
			require.NoError(t, err)
			assert.Equal(t, body, string(got))
		})
	}
}

// A read error is returned with what was read before it.
func TestReadAllError(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(io.ErrUnexpectedEOF)))
	r.ContentLength = 10
	got, err := readAll(r)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, "abc", string(got))
}
