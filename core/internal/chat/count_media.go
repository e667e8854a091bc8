package chat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/gif" // image.DecodeConfig reads the formats Anthropic takes
	_ "image/jpeg"
	_ "image/png"
	"io"
	"math"
	"strings"

	"github.com/switchboardhq/switchboard/internal/jsonscan"
)

// Anthropic's image and PDF accounting, for the estimate of count_tokens
// (https://docs.anthropic.com/en/docs/build-with-claude/vision and
// .../pdf-support): an image costs width×height/750 tokens once scaled to
// at most 1568 px on its long edge and about 1.15 megapixels; a PDF page
// 1,500 to 3,000 tokens (its text and an image of it). Counted as text
// (about four bytes of base64 a token), one screenshot would weigh hundreds
// of thousands of tokens to a client that asks count_tokens when to compact
// its context, as Claude Code does.
const (
	imageLongEdge  = 1568
	imagePixels    = 1_150_000
	pixelsPerToken = 750
	// imageTokensMax is what an image of unknown size is counted: the most
	// a scaled image can cost (1.15 megapixels).
	imageTokensMax = imagePixels/pixelsPerToken + 1
	// pdfPageTokens is a PDF page, the middle of Anthropic's range.
	pdfPageTokens = 2_250
	// pdfMaxPages is the most pages a PDF is counted: the most Anthropic
	// takes in a request.
	pdfMaxPages = 100
	// pdfChunk is how much of a PDF is decoded at a time.
	pdfChunk = 32 << 10
)

// mediaSource is the part of an image's or a document's source the
// estimate reads: its strings (empty when they are not strings), and its
// content's raw JSON.
type mediaSource struct {
	Type, MediaType, Data string
	Content               []byte
}

// read reads a source's members in place, as encoding/json reads them into
// a map (names matched exactly, the last of a name winning), and reports
// whether the source is an object.
func (s *mediaSource) read(raw []byte) bool {
	return jsonscan.Members(raw, func(k, v []byte) bool {
		var str *string
		switch string(k) {
		case "type":
			str = &s.Type
		case "media_type":
			str = &s.MediaType
		case "data":
			str = &s.Data
		case "content":
			s.Content = v
		}
		if str != nil {
			*str = ""
			if len(v) > 0 && v[0] == '"' {
				_ = json.Unmarshal(v, str)
			}
		}
		return true
	})
}

// mediaTokens is what an image or document block costs, by its source.
func mediaTokens(typ string, src mediaSource) int {
	kind, data, media := src.Type, src.Data, src.MediaType
	switch {
	case typ == "image" && kind == "base64":
		return imageTokens(data)
	case typ == "image":
		return imageTokensMax // a URL or a file: its size is not known here
	case kind == "base64" && media == "application/pdf":
		return pdfPages(data) * pdfPageTokens
	case kind == "url" || kind == "file":
		return pdfPageTokens // one page, at least
	}
	// Text sources (plain text, content blocks) are text: the estimate
	// counts them as text.
	return 0
}

// imageTokens is what Anthropic counts for a base64 image: its size read
// from its header (PNG, JPEG, GIF), scaled as Anthropic scales it;
// imageTokensMax when the size cannot be read (WebP, a broken image).
func imageTokens(data string) int {
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return imageTokensMax
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if long := max(w, h); long > imageLongEdge {
		w, h = w*imageLongEdge/long, h*imageLongEdge/long
	}
	if px := w * h; px > imagePixels {
		s := math.Sqrt(imagePixels / px)
		w, h = w*s, h*s
	}
	return max(1, int(math.Ceil(w*h/pixelsPerToken)))
}

// pdfPages is how many pages a base64 PDF has, at most pdfMaxPages: its
// page objects (/Type /Page, not the /Pages of the page tree), else the
// largest page-tree count (/Count n; both may be out of sight in compressed
// object streams), else one. The PDF is decoded and read pdfChunk bytes at
// a time.
func pdfPages(data string) int {
	var m pdfMarkers
	buf := make([]byte, pdfChunk)
	r := base64.NewDecoder(base64.StdEncoding, strings.NewReader(data))
	for {
		n, err := r.Read(buf)
		m.scan(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return 1
		}
	}
	if m.cnt == cntDigits {
		m.endCount()
	}
	pages := m.pages
	if pages == 0 {
		pages = max(1, m.counted)
	}
	return min(pages, pdfMaxPages)
}

// pdfMarkers counts a PDF's page markers as its bytes are read, as the
// regular expressions /Type\s*/Page[^s] and /Count\s+(\d+) find them
// (leftmost first, never overlapping), a marker begun in one piece ending
// in the next: typ and cnt are how far into a marker the bytes read are.
type pdfMarkers struct {
	typ     int // bytes of "/Type" read (0-5), then of "/Page" (6-10)
	cnt     int // bytes of "/Count" read (0-6), then cntSpaces, cntDigits
	n       int // the count's digits' value, at most pdfCountMax
	pages   int // page objects
	counted int // the largest count under pdfCountMax
}

const (
	cntSpaces = 7 // "/Count" and spaces read
	cntDigits = 8 // "/Count", spaces and digits read
	// pdfCountMax is where a page-tree count is no longer taken for one.
	pdfCountMax = 100_000
)

// scan reads the next bytes of the PDF, skipping to a slash when no
// marker is begun.
func (m *pdfMarkers) scan(b []byte) {
	for i := 0; i < len(b); i++ {
		if m.typ == 0 && m.cnt == 0 {
			j := bytes.IndexByte(b[i:], '/')
			if j < 0 {
				return
			}
			i += j
		}
		m.typeByte(b[i])
		m.countByte(b[i])
	}
}

func (m *pdfMarkers) typeByte(c byte) {
	switch {
	case m.typ < 5 && c == "/Type"[m.typ]:
		m.typ++
	case m.typ == 5 && pdfSpace(c):
	case m.typ >= 5 && m.typ < 10 && c == "/Page"[m.typ-5]:
		m.typ++
	case m.typ == 10 && c != 's':
		m.pages++ // c is the marker's last character
		m.typ = 0
	case m.typ == 6 && c == 'T': // the slash was a /Type's
		m.typ = 2
	case c == '/':
		m.typ = 1
	default:
		m.typ = 0
	}
}

func (m *pdfMarkers) countByte(c byte) {
	switch {
	case m.cnt < 6 && c == "/Count"[m.cnt]:
		m.cnt++
	case (m.cnt == 6 || m.cnt == cntSpaces) && pdfSpace(c):
		m.cnt = cntSpaces
	case m.cnt == cntSpaces && '0' <= c && c <= '9':
		m.n = int(c - '0')
		m.cnt = cntDigits
	case m.cnt == cntDigits && '0' <= c && c <= '9':
		m.n = min(m.n*10+int(c-'0'), pdfCountMax)
	default:
		if m.cnt == cntDigits {
			m.endCount() // c is not the marker's
		}
		m.cnt = 0
		if c == '/' {
			m.cnt = 1
		}
	}
}

func (m *pdfMarkers) endCount() {
	if m.n < pdfCountMax && m.n > m.counted {
		m.counted = m.n
	}
}

// pdfSpace is a space as \s matches it.
func pdfSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}
