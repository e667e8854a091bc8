package credential

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Scrubber is what a [Candidate]'s Value may offer: it removes the
// candidate's credential from text. The engine uses it on the transport
// error it puts into cooldown messages and logs.
type Scrubber interface {
	Scrub([]byte) []byte
}

// maxCause bounds the text of a transport error kept in a cooldown.
const maxCause = 300

// transportCause describes a failure without an HTTP answer: the class of
// its transport error (connection refused, DNS, TLS, ...) and the error's
// text, for the operator to see why an upstream could not be reached. The
// text has no URL (the request's, with its query string, is dropped; any
// other loses its query and user info) and not the candidate's credential
// (value's Scrubber). It is "" for a failure the upstream answered.
func transportCause(f *Failure, value any) string {
	if f.Status != 0 || f.Err == nil {
		return ""
	}
	err := f.Err
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	text := strings.Join(strings.Fields(err.Error()), " ")
	text = scrubURLs(text)
	if s, ok := value.(Scrubber); ok {
		text = string(s.Scrub([]byte(text)))
	}
	if len(text) > maxCause {
		text = text[:maxCause]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
		text += "..."
	}
	class := transportClass(f.Err)
	switch {
	case class == "":
		return text
	case text == "":
		return class
	}
	return class + ": " + text
}

// transportClass names the kind of a transport error, "" when it is none
// of the known ones.
func transportClass(err error) string {
	var (
		dns      *net.DNSError
		op       *net.OpError
		certVerr *tls.CertificateVerificationError
		alert    tls.AlertError
		record   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case isTimeout(err):
		return "timed out"
	case errors.As(err, &dns):
		return "DNS lookup failed"
	case errors.As(err, &op) && op.Op == "proxyconnect":
		return "proxy failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &certVerr), errors.As(err, &alert), errors.As(err, &record),
		errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return "TLS failed"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed"
	}
	return ""
}

// urlInText matches a URL in an error text.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// scrubURLs shows every URL in text without its query, fragment and user
// info, where a key may be: a provider that takes its key as a query
// parameter, or a proxy's password.
func scrubURLs(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(s string) string {
		u, err := url.Parse(s)
		if err != nil {
			return "[url]"
		}
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		return u.String()
	})
}
