package chat

import (
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/gif" // image.DecodeConfig reads the formats Anthropic takes
	_ "image/jpeg"
	_ "image/png"
	"math"
	"regexp"
	"strconv"
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

var (
	// pdfPage is a page object's type (not the /Pages of the page tree).
	pdfPage = regexp.MustCompile(`/Type\s*/Page[^s]`)
	// pdfCount is a page tree's count of pages.
	pdfCount = regexp.MustCompile(`/Count\s+(\d+)`)
)

// pdfPages is how many pages a base64 PDF has: its page objects, else the
// largest page-tree count (both may be out of sight in compressed object
// streams), else one.
func pdfPages(data string) int {
	pdf, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return 1
	}
	if n := len(pdfPage.FindAllIndex(pdf, -1)); n > 0 {
		return n
	}
	pages := 1
	for _, m := range pdfCount.FindAllSubmatch(pdf, -1) {
		if n, err := strconv.Atoi(string(m[1])); err == nil && n > pages && n < 100_000 {
			pages = n
		}
	}
	return pages
}
