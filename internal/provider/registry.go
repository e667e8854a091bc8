package provider

import (
	"regexp"
	"strings"
)

// Registry maps provider ids to their specs.
type Registry struct {
	specs map[string]Spec
	ids   []string // registration order
}

// NewRegistry returns the registry of known providers (builtinSpecs). Each
// call builds its own copy of the data.
func NewRegistry() *Registry {
	specs := builtinSpecs()
	r := &Registry{specs: make(map[string]Spec, len(specs)), ids: make([]string, 0, len(specs))}
	for _, s := range specs {
		if _, dup := r.specs[s.ID]; !dup {
			r.ids = append(r.ids, s.ID)
		}
		r.specs[s.ID] = s
	}
	return r
}

// Lookup returns the spec of a connection's provider id. Compatible family
// ids ("openai-compatible-<suffix>") get a spec of their family with no
// default base URL and no static models.
func (r *Registry) Lookup(id string) (Spec, bool) {
	if s, ok := r.specs[id]; ok {
		return s, true
	}
	if family, _ := Family(id); family != "" {
		return familySpec(family, id), true
	}
	return Spec{}, false
}

// IDs lists the registry's provider ids (not the compatible families), in
// registration order.
func (r *Registry) IDs() []string {
	return append([]string(nil), r.ids...)
}

// familySpec is the spec of a compatible family connection.
func familySpec(family, id string) Spec {
	switch family {
	case FamilyOpenAICompatible:
		return Spec{ID: id, Alias: id, Family: family, Auth: AuthBearer, Format: FormatOpenAI, Listing: true,
			ReasoningBack: true, Kinds: []string{KindLLM, KindEmbedding, KindSTT, KindTTS, KindImage}}
	case FamilyAnthropicCompatible:
		return Spec{ID: id, Alias: id, Family: family, Auth: AuthXAPIKey, Format: FormatAnthropic, Listing: true,
			Kinds: []string{KindLLM}}
	}
	return Spec{}
}

// Family splits a compatible provider id into its family and suffix; family
// is empty for other ids. Any suffix is taken, so connections stored before
// suffixes were checked keep loading; a new connection's id must pass
// ValidCompatibleID.
func Family(id string) (family, suffix string) {
	for _, f := range []string{FamilyOpenAICompatible, FamilyAnthropicCompatible} {
		if s, ok := strings.CutPrefix(id, f+"-"); ok && s != "" {
			return f, s
		}
	}
	return "", ""
}

// prefixPattern is what may stand before the slash of a model id: 1-64
// letters, digits, '.', '_' or '-', starting with a letter or digit.
var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidPrefix reports whether s may be a connection's model prefix.
func ValidPrefix(s string) bool { return prefixPattern.MatchString(s) }

// ValidCompatibleID reports whether a compatible provider id's suffix
// follows the prefix rule (ValidPrefix). The id is the model prefix of a
// connection that sets none, so a suffix with a slash would list model ids
// that routing reads differently, and spaces or markup would be shown
// wherever the ids are.
func ValidCompatibleID(id string) bool {
	family, suffix := Family(id)
	return family != "" && ValidPrefix(suffix)
}

var uuidSuffix = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// CrossInstance reports whether a compatible provider id ends in a UUID,
// which marks an upstream / cross-instance connection (interface 2.3).
func CrossInstance(id string) bool {
	family, suffix := Family(id)
	return family != "" && uuidSuffix.MatchString(suffix)
}
