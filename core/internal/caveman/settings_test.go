package caveman

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name      string
		enabled   bool
		level     string
		override  *Override
		wantLevel string
		wantOn    bool
	}{
		{name: "machine off, default level", enabled: false, level: "", wantLevel: "full", wantOn: false},
		{name: "machine on, empty level defaults to full", enabled: true, level: "", wantLevel: "full", wantOn: true},
		{name: "machine on with level", enabled: true, level: "ultra", wantLevel: "ultra", wantOn: true},
		{name: "empty override inherits", enabled: true, level: "lite", override: &Override{}, wantLevel: "lite", wantOn: true},
		{name: "override turns on", enabled: false, level: "lite", override: &Override{Enabled: &on}, wantLevel: "lite", wantOn: true},
		{name: "override turns off", enabled: true, level: "lite", override: &Override{Enabled: &off}, wantLevel: "lite", wantOn: false},
		{name: "override level only", enabled: true, level: "lite", override: &Override{Level: "wenyan"}, wantLevel: "wenyan", wantOn: true},
		{name: "override level while machine off stays off", enabled: false, level: "lite", override: &Override{Level: "ultra"}, wantLevel: "ultra", wantOn: false},
		{name: "override on and level", enabled: false, level: "", override: &Override{Enabled: &on, Level: "wenyan-ultra"}, wantLevel: "wenyan-ultra", wantOn: true},
		{name: "stale machine level falls back to default", enabled: true, level: "bogus", wantLevel: "full", wantOn: true},
		{name: "stale override level falls back to machine", enabled: true, level: "ultra", override: &Override{Level: "bogus"}, wantLevel: "ultra", wantOn: true},
		{name: "both stale fall back to default", enabled: true, level: "bogus", override: &Override{Level: "Ultra"}, wantLevel: "full", wantOn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			level, got := Resolve(tt.enabled, tt.level, tt.override)
			require.Equal(t, tt.wantLevel, level)
			require.Equal(t, tt.wantOn, got)
			require.True(t, Valid(level))
		})
	}
}

func TestOptedOut(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		want    bool
	}{
		{name: "no headers", want: false},
		{name: "off", headers: map[string]string{"X-Switchboard-Token-Saver": "off"}, want: true},
		{name: "OFF", headers: map[string]string{"x-switchboard-token-saver": "OFF"}, want: true},
		{name: "false", headers: map[string]string{"X-Switchboard-Token-Saver": "False"}, want: true},
		{name: "0", headers: map[string]string{"X-Switchboard-Token-Saver": "0"}, want: true},
		{name: "padded", headers: map[string]string{"X-Switchboard-Token-Saver": " off "}, want: true},
		{name: "legacy off", headers: map[string]string{"X-9router-Token-Saver": "off"}, want: true},
		{name: "legacy Off", headers: map[string]string{"x-9router-token-saver": "Off"}, want: true},
		{name: "on", headers: map[string]string{"X-Switchboard-Token-Saver": "on"}, want: false},
		{name: "true", headers: map[string]string{"X-Switchboard-Token-Saver": "true"}, want: false},
		{name: "empty", headers: map[string]string{"X-Switchboard-Token-Saver": ""}, want: false},
		{name: "other value", headers: map[string]string{"X-Switchboard-Token-Saver": "offf"}, want: false},
		{name: "either header suffices", headers: map[string]string{"X-Switchboard-Token-Saver": "on", "X-9router-Token-Saver": "0"}, want: true},
		{name: "unrelated header", headers: map[string]string{"X-Token-Saver": "off"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			require.Equal(t, tt.want, OptedOut(h.Get))
		})
	}
}
