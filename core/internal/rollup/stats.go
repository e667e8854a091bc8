package rollup

import (
	"cmp"
	"errors"
	"slices"
	"time"

	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
)

// ErrBadPeriod is returned for a period other than the ones Periods lists.
var ErrBadPeriod = errors.New("unknown period")

// Periods are the periods statistics cover.
var Periods = []string{"today", "24h", "7d", "30d"}

// Period is a span of hourly rows: those whose hour starts in [From, To].
type Period struct {
	Name     string
	From, To time.Time
}

// NewPeriod returns the period name ends at now: "today" is the UTC day so
// far, "24h" the current UTC hour and the 23 before it, "7d" and "30d" that
// many UTC days, today included. An empty name is "today".
func NewPeriod(name string, now time.Time) (Period, error) {
	now = now.UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	p := Period{Name: name, To: now}
	switch name {
	case "", "today":
		p.Name, p.From = "today", midnight
	case "24h":
		p.From = now.Truncate(time.Hour).Add(-23 * time.Hour)
	case "7d":
		p.From = midnight.AddDate(0, 0, -6)
	case "30d":
		p.From = midnight.AddDate(0, 0, -29)
	default:
		return Period{}, ErrBadPeriod
	}
	return p, nil
}

// Days lists the UTC days the period touches, oldest first.
func (p Period) Days() []string {
	var days []string
	for d := p.From.UTC().Truncate(24 * time.Hour); !d.After(p.To); d = d.AddDate(0, 0, 1) {
		days = append(days, Day(d))
	}
	return days
}

// contains reports whether the row of an hour of the day starting at day
// falls in the period.
func (p Period) contains(day time.Time, hour int32) bool {
	start := day.Add(time.Duration(hour) * time.Hour)
	return !start.Before(p.From) && !start.After(p.To)
}

// Breakdown is the sum of the rows sharing one value of a dimension.
type Breakdown struct {
	Key      string
	Counters *busv1.UsageCounters
}

// Stats are the totals of a period and their breakdowns.
type Stats struct {
	Totals       *busv1.UsageCounters
	ByProvider   []Breakdown
	ByModel      []Breakdown
	ByConnection []Breakdown
	ByKey        []Breakdown
	ByEndpoint   []Breakdown
}

// Summarize sums the rows of docs that fall in p. Breakdowns are ordered by
// requests, most first, then by key.
func Summarize(docs []*busv1.UsageRollup, p Period) Stats {
	st := Stats{Totals: &busv1.UsageCounters{}}
	var by [5]map[string]*busv1.UsageCounters
	for i := range by {
		by[i] = make(map[string]*busv1.UsageCounters)
	}
	add := func(m map[string]*busv1.UsageCounters, k string, c *busv1.UsageCounters) {
		if m[k] == nil {
			m[k] = &busv1.UsageCounters{}
		}
		AddCounters(m[k], c)
	}
	for _, doc := range docs {
		day, err := time.Parse(DayLayout, doc.GetDay())
		if err != nil {
			continue
		}
		for _, r := range doc.GetRows() {
			if !p.contains(day, r.GetHour()) {
				continue
			}
			c := r.GetCounters()
			AddCounters(st.Totals, c)
			add(by[0], r.GetProvider(), c)
			add(by[1], r.GetModel(), c)
			add(by[2], r.GetConnectionId(), c)
			add(by[3], r.GetKeyId(), c)
			add(by[4], r.GetEndpoint(), c)
		}
	}
	st.ByProvider = breakdowns(by[0])
	st.ByModel = breakdowns(by[1])
	st.ByConnection = breakdowns(by[2])
	st.ByKey = breakdowns(by[3])
	st.ByEndpoint = breakdowns(by[4])
	return st
}

func breakdowns(m map[string]*busv1.UsageCounters) []Breakdown {
	out := make([]Breakdown, 0, len(m))
	for k, c := range m {
		out = append(out, Breakdown{Key: k, Counters: c})
	}
	slices.SortFunc(out, func(a, b Breakdown) int {
		return cmp.Or(cmp.Compare(b.Counters.GetRequests(), a.Counters.GetRequests()), cmp.Compare(a.Key, b.Key))
	})
	return out
}
