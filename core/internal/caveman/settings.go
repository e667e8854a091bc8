package caveman

import (
	"strings"

	"github.com/switchboardhq/switchboard/proto/switchboard/contract"
)

// The per-request opt-out headers. Either one set to "off", "false" or "0"
// (any case) turns the option off for that request.
const (
	HeaderTokenSaver = contract.MDTokenSaver
	// HeaderTokenSaverLegacy is the source system's header, accepted so that
	// existing clients keep working.
	HeaderTokenSaverLegacy = contract.MDTokenSaverLegacy
)

// Override is a connection's override of the machine's settings. A nil
// Enabled and an empty Level inherit the machine's values.
type Override struct {
	Enabled *bool
	Level   string
}

// Resolve returns the level to use and whether the option is on, given the
// machine's settings and an optional per-connection override.
//
// Levels are validated when they are set (an unknown level is a 400 there),
// so an invalid level here is stale stored data: an invalid override level
// falls back to the machine's level, and an invalid or empty machine level
// to [DefaultLevel], rather than silently switching the option off.
func Resolve(machineEnabled bool, machineLevel string, override *Override) (level string, on bool) {
	on = machineEnabled
	level = DefaultLevel
	if Valid(machineLevel) {
		level = machineLevel
	}
	if override != nil {
		if override.Enabled != nil {
			on = *override.Enabled
		}
		if Valid(override.Level) {
			level = override.Level
		}
	}
	return level, on
}

// OptedOut reports whether the request opted out through either header.
// get looks a header up by name; http.Header.Get fits, and so does a gRPC
// metadata lookup that lower-cases names.
func OptedOut(get func(string) string) bool {
	for _, name := range []string{HeaderTokenSaver, HeaderTokenSaverLegacy} {
		switch strings.ToLower(strings.TrimSpace(get(name))) {
		case "off", "false", "0":
			return true
		}
	}
	return false
}
