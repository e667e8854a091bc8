package edge

import (
	"net/http"
	"strings"
)

// mounter is where routes are mounted: the edge's routes, or a test's
// *http.ServeMux.
type mounter interface {
	Handle(pattern string, handler http.Handler)
}

// routes is the edge's mux, noting the patterns mounted with a method. The
// gateway, mounted at "/" for every method, gets their paths asked with
// another method, and answers them 405 with the methods they take.
type routes struct {
	*http.ServeMux
	// withMethod are the patterns that name a method ("POST /graphql").
	withMethod []string
}

var _ mounter = (*routes)(nil)

func newRoutes() *routes { return &routes{ServeMux: http.NewServeMux()} }

func (m *routes) Handle(pattern string, handler http.Handler) {
	m.ServeMux.Handle(pattern, handler)
	if strings.ContainsAny(pattern, " \t") {
		m.withMethod = append(m.withMethod, pattern)
	}
}

func (m *routes) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(handler))
}
