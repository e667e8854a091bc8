package rollup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

func TestNewPeriod(t *testing.T) {
	now := time.Date(2026, 3, 4, 15, 20, 0, 0, time.UTC)
	cases := []struct {
		name, want string
		from       time.Time
		days       []string
	}{
		{"", "today", time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), []string{"2026-03-04"}},
		{"today", "today", time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), []string{"2026-03-04"}},
		{"24h", "24h", time.Date(2026, 3, 3, 16, 0, 0, 0, time.UTC), []string{"2026-03-03", "2026-03-04"}},
		{"7d", "7d", time.Date(2026, 2, 26, 0, 0, 0, 0, time.UTC), []string{"2026-02-26", "2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"}},
		{"30d", "30d", time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC), nil},
	}
	for _, tc := range cases {
		t.Run(tc.want+"/"+tc.name, func(t *testing.T) {
			p, err := NewPeriod(tc.name, now.In(time.FixedZone("x", 5*3600)))
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.Name)
			assert.Equal(t, tc.from, p.From)
			assert.True(t, p.To.Equal(now))
			if tc.days != nil {
				assert.Equal(t, tc.days, p.Days())
			} else {
				assert.Len(t, p.Days(), 30)
			}
		})
	}
	for _, bad := range []string{"1h", "TODAY", "week", "7"} {
		_, err := NewPeriod(bad, now)
		assert.ErrorIs(t, err, ErrBadPeriod, bad)
	}
}

func TestSummarize(t *testing.T) {
	now := time.Date(2026, 3, 4, 15, 20, 0, 0, time.UTC)
	yesterday := &busv1.UsageRollup{Day: "2026-03-03", Rows: []*busv1.UsageRow{
		row(15, "openai", "a", "c1", "k1", "embeddings", 100, 0, 100, 100), // before the last 24 hours
		row(16, "openai", "a", "c1", "k1", "embeddings", 1, 0, 10, 20),
	}}
	today := &busv1.UsageRollup{Day: "2026-03-04", Rows: []*busv1.UsageRow{
		row(9, "openai", "a", "c1", "k1", "embeddings", 2, 1, 5, 40),
		row(15, "anthropic", "b", "c2", "", "chat.completions", 2, 0, 7, 30),
		row(16, "openai", "a", "c1", "k1", "embeddings", 50, 0, 50, 50), // in the future
	}}
	docs := []*busv1.UsageRollup{yesterday, today}

	p, err := NewPeriod("24h", now)
	require.NoError(t, err)
	st := Summarize(docs, p)
	assert.EqualValues(t, 5, st.Totals.GetRequests())
	assert.EqualValues(t, 1, st.Totals.GetErrors())
	assert.EqualValues(t, 22, st.Totals.GetPromptTokens())
	assert.EqualValues(t, 90, st.Totals.GetLatencyMs())
	require.Len(t, st.ByProvider, 2)
	assert.Equal(t, "openai", st.ByProvider[0].Key)
	assert.EqualValues(t, 3, st.ByProvider[0].Counters.GetRequests())
	assert.EqualValues(t, 15, st.ByProvider[0].Counters.GetPromptTokens())
	assert.Equal(t, "anthropic", st.ByProvider[1].Key)
	require.Len(t, st.ByKey, 2)
	assert.Equal(t, "", st.ByKey[1].Key, "requests without a key have their own row")
	assert.Len(t, st.ByEndpoint, 2)
	assert.Len(t, st.ByModel, 2)
	assert.Len(t, st.ByConnection, 2)

	p, err = NewPeriod("today", now)
	require.NoError(t, err)
	assert.EqualValues(t, 4, Summarize(docs, p).Totals.GetRequests())

	p, err = NewPeriod("7d", now)
	require.NoError(t, err)
	assert.EqualValues(t, 105, Summarize(docs, p).Totals.GetRequests())

	st = Summarize(nil, p)
	assert.Zero(t, st.Totals.GetRequests())
	assert.Empty(t, st.ByProvider)
}
