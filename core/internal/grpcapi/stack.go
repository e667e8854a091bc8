package grpcapi

// requestStack is about the stack a gateway request's goroutine reaches
// (the handler, dispatch, the credential engine, the upstream HTTP call).
const requestStack = 16 << 10

// growStack grows the calling goroutine's stack to hold a gateway request
// at once, while few frames are on it. Over a network connection a request
// runs on a new goroutine with a small stack, which otherwise grows (is
// copied, every frame adjusted) two or three times, deep in the call: that
// copying was about a sixth of the core's CPU time per chat request when
// streams ran on goroutines of their own in one process too. In one process
// every call now runs on the HTTP request's goroutine, whose stack is large
// enough already: there it only clears the array.
//
//go:noinline
func growStack() {
	var frame [requestStack]byte
	touch(frame[:])
}

//go:noinline
func touch(b []byte) { b[len(b)-1] = 1 }
