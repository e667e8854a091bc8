package nodetest

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// Metrics are scraped metric families by name.
type Metrics map[string]*dto.MetricFamily

// Scrape reads url (a /metrics address) with the given Authorization
// header value ("" for none) and parses the text format.
func Scrape(t testing.TB, url, authorization string) Metrics {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "scrape %s", url)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// Metrics scrapes the edge's /metrics with the admin token.
func (in *Instance) Metrics(t testing.TB) Metrics {
	t.Helper()
	return Scrape(t, in.BaseURL+"/metrics", "Bearer "+AdminToken)
}

// Series returns the metrics of a family whose labels include all of
// labels (name, value pairs).
func (m Metrics) Series(name string, labels ...string) []*dto.Metric {
	f, ok := m[name]
	if !ok {
		return nil
	}
	var out []*dto.Metric
	for _, s := range f.GetMetric() {
		if hasLabels(s, labels) {
			out = append(out, s)
		}
	}
	return out
}

func hasLabels(s *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range s.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Value sums the counter, gauge or untyped values, or the histogram sample
// counts, of the matching series (0 when none match).
func (m Metrics) Value(name string, labels ...string) float64 {
	var v float64
	for _, s := range m.Series(name, labels...) {
		switch {
		case s.Counter != nil:
			v += s.GetCounter().GetValue()
		case s.Gauge != nil:
			v += s.GetGauge().GetValue()
		case s.Histogram != nil:
			v += float64(s.GetHistogram().GetSampleCount())
		case s.Untyped != nil:
			v += s.GetUntyped().GetValue()
		}
	}
	return v
}

// LabelValues lists the distinct values of a label across a family.
func (m Metrics) LabelValues(name, label string) map[string]bool {
	out := map[string]bool{}
	for _, s := range m.Series(name) {
		for _, l := range s.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = true
			}
		}
	}
	return out
}
