package grpcapi

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboardhq/switchboard/core/internal/rollup"
	"github.com/switchboardhq/switchboard/internal/kvmirror"
	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/spine"
	"github.com/switchboardhq/switchboard/internal/usagebatch"
	busv1 "github.com/switchboardhq/switchboard/proto/switchboard/bus/v1"
	corev1 "github.com/switchboardhq/switchboard/proto/switchboard/core/v1"
)

// Request log bounds: a page and the events one call may read.
const (
	defaultRequestPage = 50
	maxRequestPage     = 500
	// MaxRequestScan bounds the SB_USAGE messages one ListRequests call
	// reads (a message may be a batch of events); a page that needs more
	// answers short with a cursor to continue.
	MaxRequestScan = 20_000
	// firstScanWindow is the first window of stream sequences read back
	// from the cursor; each next window doubles.
	firstScanWindow = 512
	fetchBatch      = 256
	// An event is stored after its time: by the publisher's buffering
	// (storeLag at most, beyond which the window may miss it) and give or
	// take clock skew between machines (storeSlack).
	storeLag   = 5 * time.Minute
	storeSlack = time.Minute
)

// EnableRequestLog gives the request log its stream.
func (a *Admin) EnableRequestLog(js jetstream.JetStream) *Admin {
	a.js = js
	return a
}

// requestFilter is a ListRequests request, parsed.
type requestFilter struct {
	keyID, model, connectionID, provider string
	status                               func(int32) bool
	since, until                         time.Time
}

func parseStatusFilter(s string) (func(int32) bool, error) {
	switch s {
	case "":
		return nil, nil
	case "error":
		return func(st int32) bool { return st >= 400 }, nil
	case "1xx", "2xx", "3xx", "4xx", "5xx":
		lo := int32(s[0]-'0') * 100
		return func(st int32) bool { return st >= lo && st < lo+100 }, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 || n > 599 {
		return nil, errors.New("status must be an HTTP status, 2xx, 4xx, 5xx or error")
	}
	return func(st int32) bool { return st == int32(n) }, nil
}

func (f requestFilter) match(ev *busv1.UsageEvent) bool {
	switch {
	case f.keyID != "" && ev.GetKeyId() != f.keyID,
		f.model != "" && ev.GetModel() != f.model,
		f.connectionID != "" && ev.GetConnectionId() != f.connectionID,
		f.provider != "" && ev.GetProvider() != f.provider,
		f.status != nil && !f.status(ev.GetStatus()):
		return false
	}
	t := ev.GetTime().AsTime()
	if !f.since.IsZero() && t.Before(f.since) {
		return false
	}
	if !f.until.IsZero() && t.After(f.until) {
		return false
	}
	return true
}

// ListRequests reads the machine's usage events back from the cursor (the
// place of the last answered event, exclusive), newest first. An event's
// place is its message's stream sequence and its index in that message
// when the message is a batch (newer events of a batch have higher
// indexes); a cursor is "<sequence>" for index 0 and "<sequence>.<index>"
// otherwise, so every cursor of the time before batches still reads. The
// stream is read forwards, so it reads windows of sequences that grow back
// from the cursor, each with an ephemeral consumer filtered on the machine's
// subject, and keeps the newest matches; since and until bound the window by
// time (DeliverByStartTime) so a narrow time range stays cheap.
func (a *Admin) ListRequests(ctx context.Context, req *corev1.ListRequestsRequest) (*corev1.ListRequestsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case limit < 0 || limit > maxRequestPage:
		return nil, invalidParam("limit", "invalid_value", "limit must be 1 to "+strconv.Itoa(maxRequestPage))
	case limit == 0:
		limit = defaultRequestPage
	}
	f := requestFilter{keyID: req.GetKeyId(), model: req.GetModel(), connectionID: req.GetConnectionId(), provider: req.GetProvider()}
	if f.status, err = parseStatusFilter(req.GetStatus()); err != nil {
		return nil, invalidParam("status", "invalid_value", err.Error())
	}
	if req.GetSince() != nil {
		f.since = req.GetSince().AsTime()
	}
	if req.GetUntil() != nil {
		f.until = req.GetUntil().AsTime()
	}
	if !f.since.IsZero() && !f.until.IsZero() && f.until.Before(f.since) {
		return nil, invalidParam("until", "invalid_value", "until must not be before since")
	}
	var (
		upper  uint64 // of messages, exclusive
		cursor place  // of events, exclusive; zero: none
	)
	if c := req.GetCursor(); c != "" {
		if cursor, err = parseCursor(c); err != nil {
			return nil, invalidParam("cursor", "invalid_cursor", "cursor must be the nextCursor of a previous answer")
		}
		// The message of the cursor is read again when the page ended
		// inside it.
		upper = cursor.seq
		if cursor.index > 0 {
			upper++
		}
	}
	if a.js == nil {
		return nil, internal("request log unavailable")
	}
	stream, err := a.js.Stream(ctx, spine.StreamUsage)
	if err != nil {
		return nil, a.busError(err)
	}
	// Stream already asked the server for the stream's state: no second
	// round trip per call.
	info := stream.CachedInfo()
	subject := spine.SubjectUsage + "." + machineID
	// A stream that never held a message has no first sequence (0), and
	// sequences start at 1.
	lower := max(info.State.FirstSeq, 1) // inclusive
	if upper == 0 || upper > info.State.LastSeq+1 {
		upper = info.State.LastSeq + 1
	}
	if !f.since.IsZero() {
		seq, ok, err := firstSeqAfter(ctx, stream, subject, f.since.Add(-storeSlack))
		if err != nil {
			return nil, a.busError(err)
		}
		if !ok {
			return &corev1.ListRequestsResponse{}, nil
		}
		lower = max(lower, seq)
	}
	if !f.until.IsZero() {
		seq, ok, err := firstSeqAfter(ctx, stream, subject, f.until.Add(storeLag))
		if err != nil {
			return nil, a.busError(err)
		}
		if ok {
			upper = min(upper, seq)
		}
	}

	type hit struct {
		at place
		ev *busv1.UsageEvent
	}
	var (
		found   []hit // newest first
		scanned int
		window  = uint64(firstScanWindow)
		next    string
	)
	for upper > lower && len(found) < limit {
		if scanned >= MaxRequestScan {
			next = strconv.FormatUint(upper, 10)
			break
		}
		// A window never holds more sequences than the scan may still
		// read, so it is read whole and no newer event is skipped.
		w := min(window, uint64(MaxRequestScan-scanned))
		from := lower
		if upper-lower > w {
			from = upper - w
		}
		var page []hit
		n, err := readRange(ctx, stream, subject, from, upper, MaxRequestScan-scanned, func(at place, ev *busv1.UsageEvent) {
			if (cursor.seq == 0 || at.before(cursor)) && f.match(ev) {
				page = append(page, hit{at, ev})
			}
		})
		scanned += n
		if err != nil {
			return nil, a.busError(err)
		}
		slices.Reverse(page)
		for _, h := range page {
			if len(found) == limit {
				break
			}
			found = append(found, h)
		}
		upper = from
		window *= 2
	}
	resp := &corev1.ListRequestsResponse{Scanned: int32(scanned)}
	if len(found) == limit {
		next = found[len(found)-1].at.String()
	}
	if at, err := parseCursor(next); err == nil && (place{lower, 0}).before(at) {
		resp.NextCursor = next
	}
	names := a.names(machineID)
	for _, h := range found {
		resp.Requests = append(resp.Requests, requestEntry(h.at, h.ev, names))
	}
	return resp, nil
}

// place is where an event is in SB_USAGE: its message's sequence and its
// index in that message (0 for a message of one event).
type place struct {
	seq   uint64
	index int
}

// before reports whether p is older than q.
func (p place) before(q place) bool {
	return p.seq < q.seq || p.seq == q.seq && p.index < q.index
}

// String is p as a cursor.
func (p place) String() string {
	if p.index == 0 {
		return strconv.FormatUint(p.seq, 10)
	}
	return strconv.FormatUint(p.seq, 10) + "." + strconv.Itoa(p.index)
}

// parseCursor reads "<sequence>" or "<sequence>.<index>".
func parseCursor(c string) (place, error) {
	seq, index, dotted := strings.Cut(c, ".")
	var p place
	var err error
	if p.seq, err = strconv.ParseUint(seq, 10, 64); err != nil || p.seq == 0 {
		return place{}, errors.New("invalid cursor")
	}
	if dotted {
		if p.index, err = strconv.Atoi(index); err != nil || p.index <= 0 {
			return place{}, errors.New("invalid cursor")
		}
	}
	if p.String() != c {
		// Only cursors as written: "01", "1.+2" and the like are not.
		return place{}, errors.New("invalid cursor")
	}
	return p, nil
}

func (a *Admin) busError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	a.log.Error("request log: bus", "err", err)
	return statusError(codes.Unavailable, "unavailable", "the usage stream is unavailable")
}

// ephemeral makes a short-lived consumer of the machine's subject.
func ephemeral(ctx context.Context, stream jetstream.Stream, subject string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, func(), error) {
	cfg.FilterSubject = subject
	cfg.AckPolicy = jetstream.AckNonePolicy
	cfg.InactiveThreshold = 30 * time.Second
	cfg.MemoryStorage = true
	cfg.Replicas = 1
	cons, err := stream.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	name := cons.CachedInfo().Name
	return cons, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stream.DeleteConsumer(dctx, name)
	}, nil
}

// firstSeqAfter is the sequence of the machine's first event stored at or
// after t.
func firstSeqAfter(ctx context.Context, stream jetstream.Stream, subject string, t time.Time) (uint64, bool, error) {
	cons, done, err := ephemeral(ctx, stream, subject, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t})
	if err != nil {
		return 0, false, err
	}
	defer done()
	if cons.CachedInfo().NumPending == 0 {
		return 0, false, nil
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		return 0, false, err
	}
	md, err := msg.Metadata()
	if err != nil {
		return 0, false, err
	}
	return md.Sequence.Stream, true, nil
}

// readRange reads the machine's messages of sequences [from, to), at most
// budget of them, and answers how many it read; fn gets their events, in
// stream order, a batch's expanded.
func readRange(ctx context.Context, stream jetstream.Stream, subject string, from, to uint64, budget int, fn func(place, *busv1.UsageEvent)) (int, error) {
	cons, done, err := ephemeral(ctx, stream, subject, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return 0, err
	}
	defer done()
	pending := cons.CachedInfo().NumPending
	read := 0
	for pending > 0 && read < budget {
		batch, err := cons.Fetch(int(min(uint64(fetchBatch), pending, uint64(budget-read))), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return read, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			md, err := msg.Metadata()
			if err != nil {
				continue
			}
			if md.Sequence.Stream >= to {
				return read, nil
			}
			read++
			pending = md.NumPending
			parts, err := usagebatch.Split(msg.Headers(), msg.Data())
			if err != nil {
				continue
			}
			for i, p := range parts {
				ev := new(busv1.UsageEvent)
				if proto.Unmarshal(p, ev) != nil {
					continue
				}
				fn(place{md.Sequence.Stream, i}, ev)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return read, err
		}
		if got == 0 {
			return read, nil
		}
	}
	return read, nil
}

// names are a machine's connection and key names by id.
type names struct{ conns, keys map[string]string }

func (a *Admin) names(machineID string) names {
	n := names{conns: map[string]string{}, keys: map[string]string{}}
	for _, c := range a.store.MachineConnections(machineID) {
		n.conns[c.GetId()] = c.GetName()
	}
	a.store.Keys.Range(func(_ string, e kvmirror.Entry[*busv1.APIKey]) bool {
		if e.Value.GetMachineId() == machineID {
			n.keys[e.Value.GetId()] = e.Value.GetName()
		}
		return true
	})
	return n
}

func requestEntry(at place, ev *busv1.UsageEvent, n names) *corev1.RequestLogEntry {
	return &corev1.RequestLogEntry{
		Sequence:         float64(at.seq),
		Index:            int32(at.index),
		RequestId:        ev.GetRequestId(),
		Time:             ev.GetTime(),
		KeyId:            ev.GetKeyId(),
		KeyName:          n.keys[ev.GetKeyId()],
		Provider:         ev.GetProvider(),
		ConnectionId:     ev.GetConnectionId(),
		ConnectionName:   n.conns[ev.GetConnectionId()],
		Model:            ev.GetModel(),
		Endpoint:         ev.GetEndpoint(),
		Status:           ev.GetStatus(),
		ErrorCode:        ev.GetErrorCode(),
		LatencyMs:        float64(ev.GetLatencyMs()),
		Attempts:         ev.GetAttempts(),
		PromptTokens:     float64(ev.GetPromptTokens()),
		CompletionTokens: float64(ev.GetCompletionTokens()),
		TotalTokens:      float64(ev.GetTotalTokens()),
		CachedTokens:     float64(ev.GetCachedTokens()),
		CacheWriteTokens: float64(ev.GetCacheWriteTokens()),
		ReasoningTokens:  float64(ev.GetReasoningTokens()),
		EventId:          ev.GetEventId(),
		TokensEstimated:  ev.GetTokensEstimated(),
		Partial:          ev.GetPartial(),
	}
}

// maxSeries is how many values of a dimension GetUsageSeries draws; the
// rest are summed as "other".
const maxSeries = 8

// GetUsageSeries answers usage over time from the hourly roll-ups: hourly
// buckets for "today" and "24h", daily ones for "7d" and "30d".
func (a *Admin) GetUsageSeries(ctx context.Context, req *corev1.GetUsageSeriesRequest) (*corev1.GetUsageSeriesResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	p, err := rollup.NewPeriod(req.GetPeriod(), a.now())
	if err != nil {
		return nil, invalidParam("period", "invalid_period", "period must be one of today, 24h, 7d, 30d")
	}
	by := cmp.Or(req.GetBy(), "provider")
	var dim func(*busv1.UsageRow) string
	switch by {
	case "provider":
		dim = (*busv1.UsageRow).GetProvider
	case "model":
		dim = (*busv1.UsageRow).GetModel
	case "key":
		dim = (*busv1.UsageRow).GetKeyId
	default:
		return nil, invalidParam("by", "invalid_value", "by must be one of provider, model, key")
	}
	step := time.Hour
	if p.Name == "7d" || p.Name == "30d" {
		step = 24 * time.Hour
	}
	start := p.From.Truncate(step)
	nb := int(p.To.Sub(start)/step) + 1
	resp := &corev1.GetUsageSeriesResponse{Period: p.Name, By: by}
	for i := range nb {
		resp.Buckets = append(resp.Buckets, timestamppb.New(start.Add(time.Duration(i)*step)))
	}
	type acc struct{ req, errs, tok []float64 }
	series := map[string]*acc{}
	total := map[string]float64{}
	for _, day := range p.Days() {
		e, ok := a.store.Rollups.Get(rollup.Key(machineID, day))
		if !ok {
			continue
		}
		d, err := time.Parse(rollup.DayLayout, day)
		if err != nil {
			continue
		}
		for _, r := range e.Value.GetRows() {
			at := d.Add(time.Duration(r.GetHour()) * time.Hour)
			if at.Before(p.From.Truncate(time.Hour)) || at.After(p.To) {
				continue
			}
			i := int(at.Sub(start) / step)
			if i < 0 || i >= nb {
				continue
			}
			k := dim(r)
			s := series[k]
			if s == nil {
				s = &acc{make([]float64, nb), make([]float64, nb), make([]float64, nb)}
				series[k] = s
			}
			c := r.GetCounters()
			s.req[i] += float64(c.GetRequests())
			s.errs[i] += float64(c.GetErrors())
			s.tok[i] += float64(c.GetTotalTokens())
			total[k] += float64(c.GetRequests())
		}
	}
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		return cmp.Or(cmp.Compare(total[y], total[x]), strings.Compare(x, y))
	})
	var n names // key names, read only when the series are by key
	if by == "key" {
		n = a.names(machineID)
	}
	var other *corev1.UsageSeries
	for i, k := range keys {
		s := series[k]
		if i >= maxSeries {
			if other == nil {
				other = &corev1.UsageSeries{Key: "other", Requests: make([]float64, nb), Errors: make([]float64, nb), TotalTokens: make([]float64, nb)}
			}
			for j := range nb {
				other.Requests[j] += s.req[j]
				other.Errors[j] += s.errs[j]
				other.TotalTokens[j] += s.tok[j]
			}
			continue
		}
		name := ""
		if by == "key" {
			name = n.keys[k]
		}
		resp.Series = append(resp.Series, &corev1.UsageSeries{Key: k, Name: name, Requests: s.req, Errors: s.errs, TotalTokens: s.tok})
	}
	if other != nil {
		resp.Series = append(resp.Series, other)
	}
	return resp, nil
}

// ListCooldowns lists the machine's cooldowns still running.
func (a *Admin) ListCooldowns(ctx context.Context, req *corev1.ListCooldownsRequest) (*corev1.ListCooldownsResponse, error) {
	machineID, err := a.auth.Admin(ctx)
	if err != nil {
		return nil, err
	}
	conns := map[string]string{}
	for _, c := range a.store.MachineConnections(machineID) {
		conns[c.GetId()] = c.GetName()
	}
	now := a.now()
	resp := &corev1.ListCooldownsResponse{}
	a.store.Cooldowns.Range(func(_ string, e kvmirror.Entry[*busv1.Cooldown]) bool {
		cd := e.Value
		name, mine := conns[cd.GetConnectionId()]
		if !mine || (req.GetConnectionId() != "" && cd.GetConnectionId() != req.GetConnectionId()) {
			return true
		}
		until := cd.GetUntil().AsTime()
		if !until.After(now) {
			return true
		}
		resp.Cooldowns = append(resp.Cooldowns, &corev1.ConnectionCooldown{
			ConnectionId:   cd.GetConnectionId(),
			ConnectionName: name,
			Model:          cd.GetModel(),
			Until:          cd.GetUntil(),
			SecondsLeft:    int32((until.Sub(now) + time.Second - 1) / time.Second),
			Reason:         cd.GetReason(),
			Status:         cd.GetStatus(),
			Message:        cd.GetMessage(),
		})
		return true
	})
	slices.SortFunc(resp.Cooldowns, func(x, y *corev1.ConnectionCooldown) int {
		return cmp.Or(strings.Compare(x.GetConnectionName(), y.GetConnectionName()), strings.Compare(x.GetModel(), y.GetModel()))
	})
	return resp, nil
}

// ListProviders lists the provider registry and the compatible families.
func (a *Admin) ListProviders(ctx context.Context, _ *corev1.ListProvidersRequest) (*corev1.ListProvidersResponse, error) {
	if _, err := a.auth.Admin(ctx); err != nil {
		return nil, err
	}
	resp := &corev1.ListProvidersResponse{}
	for _, fam := range []string{"openai-compatible", "anthropic-compatible"} {
		spec, _ := a.registry.Lookup(fam + "-x")
		resp.Providers = append(resp.Providers, &corev1.ProviderInfo{Id: fam, Auth: "apikey", Kinds: spec.Kinds, BaseUrlRequired: true, Family: fam})
	}
	for _, id := range a.registry.IDs() {
		spec, _ := a.registry.Lookup(id)
		auth := "apikey"
		if a.logins != nil && a.logins.Providers != nil {
			if p, ok := a.logins.Providers.Lookup(id); ok {
				auth = "device"
				if p.Flow == oauth.FlowAuthorizationCode {
					auth = "authorization"
				}
			}
		}
		resp.Providers = append(resp.Providers, &corev1.ProviderInfo{
			Id: id, Alias: spec.Alias, Auth: auth, DefaultBaseUrl: spec.DefaultBaseURL, Kinds: spec.Kinds,
		})
	}
	return resp, nil
}
