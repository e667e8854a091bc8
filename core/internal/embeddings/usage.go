package embeddings

import "unicode/utf8"

// charsPerToken is the estimate's ratio, chat's: about four characters of
// text a token.
const charsPerToken = 4

// Billed is the usage an answer to req is recorded with: the upstream's,
// or, when it reported none (no usage, or zeros), the gateway's count of
// req's input, estimated then true, as a chat answer's usage is when its
// upstream reported none: about four characters a token of each text
// (rounded up, so a text is at least one), the tokens themselves of token
// arrays. A negative count the upstream reports counts as zero, as a chat
// answer's does, so a bad upstream cannot make a bill negative. The answer
// the client gets keeps the upstream's usage.
func (r *Response) Billed(req *Request) (prompt, total int64, estimated bool) {
	if prompt, total = max(r.PromptTokens, 0), max(r.TotalTokens, 0); prompt > 0 || total > 0 {
		return prompt, total, false
	}
	var n int64
	for _, t := range req.Tokens {
		n += int64(len(t))
	}
	for _, s := range req.Texts {
		n += int64(utf8.RuneCountInString(s)+charsPerToken-1) / charsPerToken
	}
	return n, n, n > 0
}
