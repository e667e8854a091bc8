package chat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pngOf(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func jpegOf(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)), nil))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// An image costs what Anthropic counts for it: width×height/750 once
// scaled to 1568 px on its long edge and 1.15 megapixels.
func TestImageTokensFollowAnthropicsScaling(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want int
	}{
		{"small PNG", pngOf(t, 200, 200), 54},             // 40,000 / 750
		{"1000×500 JPEG", jpegOf(t, 1000, 500), 667},      // 500,000 / 750
		{"long edge past 1568", pngOf(t, 3136, 400), 418}, // 1568×200
		{"past 1.15 megapixels", pngOf(t, 4000, 3000), 1534},
		{"WebP, size unknown", base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x00\x00\x00WEBPVP8 ")), imageTokensMax},
		{"not base64", "%%%", imageTokensMax},
	} {
		assert.InDelta(t, tc.want, imageTokens(tc.data), 1, tc.name)
	}
}

func TestPDFPages(t *testing.T) {
	pdf := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	assert.Equal(t, 3, pdfPages(pdf("%PDF-1.7\n1 0 obj <</Type /Pages /Count 3>>\n2 0 obj <</Type /Page>>\n3 0 obj <</Type/Page /Parent 1 0 R>>\n4 0 obj <</Type /Page\n>>")))
	assert.Equal(t, 12, pdfPages(pdf("%PDF-1.7\n1 0 obj <</Type /Pages /Kids [2 0 R] /Count 12>> (the pages in object streams)")))
	assert.Equal(t, 1, pdfPages(pdf("%PDF-1.7 nothing readable")))
	assert.Equal(t, 1, pdfPages("%%%"))
}

// The estimate counts a request's images and PDFs as Anthropic does, in
// messages and in tool results, and their base64 bytes not as text: a
// screenshot is a thousand or so tokens, not a quarter of a megabyte's.
func TestEstimateCountsImagesAsAnthropicDoes(t *testing.T) {
	// A screenshot of 1280×800 noisy pixels: over a megabyte of base64,
	// 1,366 tokens.
	noise := image.NewGray(image.Rect(0, 0, 1280, 800))
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range noise.Pix {
		noise.Pix[i] = byte(rnd.Uint32())
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, noise))
	shot := base64.StdEncoding.EncodeToString(b.Bytes())
	require.Greater(t, len(shot), 1<<20)
	text := strings.Repeat("describe this screen ", 50) // 1,050 bytes
	body := map[string]any{
		"model": "m", "max_tokens": 1,
		"messages": []any{
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": text},
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": shot}},
			}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "shot", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": []any{
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": shot}},
				map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": "application/pdf",
					"data": base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 <</Type /Page>> <</Type /Page>>"))}},
			}}}},
		},
	}
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	in, err := parse(DialectMessages, raw)
	require.NoError(t, err)
	var got struct {
		InputTokens int `json:"input_tokens"`
	}
	require.NoError(t, json.Unmarshal(estimateTokens(in), &got))
	textTokens := (len(text) + len("shot{}") + 3) / 4 // the text, the tool use's name and input
	assert.Equal(t, textTokens+3*messageOverhead+2*1366+2*pdfPageTokens, got.InputTokens)
	assert.Less(t, got.InputTokens, 8_000, "not the %d tokens of its bytes", len(raw)/4)
}

// The page markers pdfPages counts, as a regular expression finds them: a
// page object's type (not /Pages), else the largest page-tree count under
// 100,000, else one page.
var (
	pdfPageMarker  = regexp.MustCompile(`/Type\s*/Page[^s]`)
	pdfCountMarker = regexp.MustCompile(`/Count\s+(\d+)`)
)

func pdfMarkedPages(pdf []byte) int {
	if n := len(pdfPageMarker.FindAllIndex(pdf, -1)); n > 0 {
		return min(n, pdfMaxPages)
	}
	pages := 1
	for _, m := range pdfCountMarker.FindAllSubmatch(pdf, -1) {
		if n, err := strconv.Atoi(string(m[1])); err == nil && n > pages && n < 100_000 {
			pages = n
		}
	}
	return min(pages, pdfMaxPages)
}

// A PDF read a piece at a time counts the pages its markers say, markers
// across the pieces' bounds included.
func TestPDFPagesCountsTheMarkers(t *testing.T) {
	parts := []string{"/Type", "/Page", "/Pages", "/Count", " ", "\n", "\t", "\v", "/", "s", "x", ">",
		"0", "7", "12", "é", "\xff", "/Type /Page", "/Type/Page/", "/Count 3", "/Count 000042"}
	rnd := rand.New(rand.NewPCG(3, 4))
	var cases []string
	for range 20_000 {
		var b strings.Builder
		for range rnd.IntN(30) {
			b.WriteString(parts[rnd.IntN(len(parts))])
		}
		cases = append(cases, b.String())
	}
	for _, marker := range []string{"/Type \n /Page>", "/Type/Pages/Count 7 ", "/Count 12345 "} {
		for k := range len(marker) + 2 {
			cases = append(cases, strings.Repeat("x", pdfChunk-k)+marker+"/Type/Page/")
			cases = append(cases, strings.Repeat("x", 2*pdfChunk-k)+marker)
		}
	}
	for _, pdf := range cases {
		want := pdfMarkedPages([]byte(pdf))
		if got := pdfPages(base64.StdEncoding.EncodeToString([]byte(pdf))); got != want {
			require.Failf(t, "pages", "%d, want %d, for %q", got, want, pdf[max(0, len(pdf)-60):])
		}
	}
}

// A PDF is read a piece at a time, not decoded whole with every marker
// listed, and counted at most pdfMaxPages pages (Anthropic takes no more
// in a request): 15 MB of base64 that repeats a page marker a million
// times is 100 pages, read in a bounded buffer.
func TestPDFPagesReadsAPieceAtATime(t *testing.T) {
	data := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("/Type/Pagex", 1_000_000)))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	pages := pdfPages(data)
	runtime.ReadMemStats(&after)
	assert.Equal(t, pdfMaxPages, pages)
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(1<<20), "bytes allocated for %d bytes of base64", len(data))
}
