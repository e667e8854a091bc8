package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// contentParts decodes message content: a string is one text part, null or
// absent is none.
func contentParts(raw json.RawMessage, param string) ([]chatPart, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(param, "invalid string")
		}
		return []chatPart{{Type: "text", Text: s}}, nil
	case '[':
		var parts []chatPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, invalid(param, "must be a string or an array of content parts")
		}
		return parts, nil
	}
	return nil, invalid(param, "must be a string or an array of content parts")
}

// textBlocks converts content that may only hold text (system, tool).
// Empty texts are dropped: Anthropic refuses empty text blocks.
func textBlocks(raw json.RawMessage, param string) ([]msgBlock, error) {
	parts, err := contentParts(raw, param)
	if err != nil {
		return nil, err
	}
	blocks := make([]msgBlock, 0, len(parts))
	for j := range parts {
		p := &parts[j]
		if p.Type != "text" {
			return nil, invalid(param+"["+strconv.Itoa(j)+"].type", "only text parts are allowed here, got "+strconv.Quote(p.Type))
		}
		if b, ok, err := textBlock(p, param+"["+strconv.Itoa(j)+"]"); err != nil {
			return nil, err
		} else if ok {
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

func textBlock(p *chatPart, param string) (msgBlock, bool, error) {
	text := p.Text
	if p.Type == "refusal" {
		text = p.Refusal
	}
	if text == "" {
		return msgBlock{}, false, nil
	}
	cc, err := cacheControl(p.CacheControl, param)
	return msgBlock{Type: "text", Text: text, CacheControl: cc}, true, err
}

func cacheControl(raw json.RawMessage, param string) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	if !isJSONObject(raw) {
		return nil, invalid(param+".cache_control", "must be an object")
	}
	return raw, nil
}

func userBlocks(raw json.RawMessage, param string) ([]msgBlock, error) {
	parts, err := contentParts(raw, param)
	if err != nil {
		return nil, err
	}
	blocks := make([]msgBlock, 0, len(parts))
	for j := range parts {
		p := &parts[j]
		pp := param + "[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case "text":
			if b, ok, err := textBlock(p, pp); err != nil {
				return nil, err
			} else if ok {
				blocks = append(blocks, b)
			}
		case "image_url":
			b, err := imageBlock(p, pp)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		case "file":
			b, err := documentBlock(p, pp)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		default:
			return nil, invalid(pp+".type", "content part type "+strconv.Quote(p.Type)+" is not supported by this model's provider")
		}
	}
	return blocks, nil
}

// imageBlock converts an image_url part: a data: URL becomes a base64
// source, an http(s) URL a url source.
func imageBlock(p *chatPart, param string) (msgBlock, error) {
	var url string
	switch raw := bytes.TrimSpace(p.ImageURL); {
	case len(raw) > 0 && raw[0] == '"':
		url = rawString(raw)
	case isJSONObject(raw):
		var v struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(raw, &v) != nil {
			return msgBlock{}, invalid(param+".image_url", "must be an object with a url")
		}
		url = v.URL
	}
	if url == "" {
		return msgBlock{}, invalid(param+".image_url.url", "url is required")
	}
	cc, err := cacheControl(p.CacheControl, param)
	if err != nil {
		return msgBlock{}, err
	}
	b := msgBlock{Type: "image", CacheControl: cc}
	lower := strings.ToLower(url[:min(len(url), 8)])
	switch {
	case strings.HasPrefix(lower, "data:"):
		mediaType, data, err := parseDataURL(url, param+".image_url.url")
		if err != nil {
			return msgBlock{}, err
		}
		switch mediaType {
		case "image/jpg":
			mediaType = "image/jpeg"
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		default:
			return msgBlock{}, invalid(param+".image_url.url", "image type "+strconv.Quote(mediaType)+" is not supported (jpeg, png, gif, webp are)")
		}
		b.Source = &msgSource{Type: "base64", MediaType: mediaType, Data: data}
	case strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "http://"):
		b.Source = &msgSource{Type: "url", URL: url}
	default:
		return msgBlock{}, invalid(param+".image_url.url", "must be an http(s) URL or a base64 data: URL")
	}
	return b, nil
}

// documentBlock converts a file part holding a PDF as a data: URL.
func documentBlock(p *chatPart, param string) (msgBlock, error) {
	if p.File == nil || p.File.FileData == "" {
		return msgBlock{}, invalid(param+".file.file_data", "file_data is required (file_id is not supported by this model's provider)")
	}
	mediaType, data, err := parseDataURL(p.File.FileData, param+".file.file_data")
	if err != nil {
		return msgBlock{}, err
	}
	if mediaType != "application/pdf" {
		return msgBlock{}, invalid(param+".file.file_data", "file type "+strconv.Quote(mediaType)+" is not supported (application/pdf is)")
	}
	cc, err := cacheControl(p.CacheControl, param)
	if err != nil {
		return msgBlock{}, err
	}
	return msgBlock{Type: "document", Source: &msgSource{Type: "base64", MediaType: mediaType, Data: data}, CacheControl: cc}, nil
}

// parseDataURL splits data:<media type>[;params];base64,<data>.
func parseDataURL(url, param string) (mediaType, data string, err error) {
	meta, data, ok := strings.Cut(url[len("data:"):], ",")
	if !ok || data == "" {
		return "", "", invalid(param, "malformed data: URL")
	}
	mediaType, params, _ := strings.Cut(meta, ";")
	mediaType = strings.ToLower(strings.TrimSpace(mediaType))
	base64 := false
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			base64 = true
		}
	}
	if !base64 {
		return "", "", invalid(param, "data: URL must be base64-encoded")
	}
	if mediaType == "" {
		return "", "", invalid(param, "data: URL needs a media type")
	}
	return mediaType, data, nil
}
