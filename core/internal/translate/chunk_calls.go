package translate

// streamCalls tells which call of a chunk stream each tool-call delta
// belongs to. OpenAI numbers parallel calls with tool_calls[].index and
// sends a call's id with its first delta only; Gemini's OpenAI-compatible
// endpoint sends each call whole in a delta of its own, with its own id and
// no index (so index 0 for all). A delta whose id differs from that of the
// call open at its index starts a new call; one without id (or with the
// same id) continues the open call, and an open call that had no id takes
// the first it is given.
type streamCalls struct {
	open map[int]openCall // by the deltas' index
	next int
}

type openCall struct {
	call int
	id   string
}

// call is the number of tc's call: calls are numbered from 0 in the order
// their first delta came.
func (s *streamCalls) call(tc *chatToolCallS) int {
	o, ok := s.open[tc.Index]
	if ok && o.id == "" && tc.ID != "" {
		o.id = tc.ID
		s.open[tc.Index] = o
	}
	if !ok || (tc.ID != "" && tc.ID != o.id) {
		if s.open == nil {
			s.open = map[int]openCall{}
		}
		o = openCall{call: s.next, id: tc.ID}
		s.next++
		s.open[tc.Index] = o
	}
	return o.call
}
