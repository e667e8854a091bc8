package clitools

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A config.toml as Codex users keep it: trusted projects (whose paths need
// quoting, one with a ']' in it), a multi-line string whose lines start with
// '[' and look like keys, a multi-line array, an inline table, arrays of
// tables, comments and odd spacing.
const codexUserConfig = `# Codex settings
model = "gpt-5-codex"   # the default
model_reasoning_effort = "high"
developer_instructions = """
Answer briefly.
[model_providers.switchboard]
model_provider = "not a key"
"""
notify = [
  "notify-send",
  "Codex",
]

# Trusted by "codex" itself.
[projects."/home/me/app"]
trust_level = "trusted"

[ projects . '/home/me/odd]dir' ]   # a ']' inside quotes
trust_level = "trusted"

[mcp_servers.docs]
command = "npx"
args = ["-y", "@acme/docs-mcp"]
env = { "DOCS_URL" = "https://docs.example/[v1]" }

[[mcp_servers.docs.tools]]
name = "search"

[[mcp_servers.docs.tools]]
name = "fetch"
description = '''
[not a header]
'''
`

func writeCodexConfig(t *testing.T, path, cfg string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
}

func readCodexConfig(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// Configuring a real-looking file changes the model in place, adds
// model_provider after the last top-level statement (the multi-line array's
// closing line) and our table at the end; not one other byte changes.
// Unconfiguring then gives back the user's file, their model put back in
// place (its comment after one space).
func TestCodexSettingsEditOnlyTheirOwnLinesOfARealConfig(t *testing.T) {
	h, _, path := newCodexHandler(t)
	writeCodexConfig(t, path, codexUserConfig)

	w, st := serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"openai/gpt-5-codex"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, true, st["configured"])
	assert.Equal(t, "openai/gpt-5-codex", st["model"])
	configured := strings.Replace(codexUserConfig, `model = "gpt-5-codex"   # the default`, `model = "openai/gpt-5-codex" # the default`, 1)
	configured = strings.Replace(configured, "  \"Codex\",\n]\n", "  \"Codex\",\n]\nmodel_provider = \"switchboard\"\n", 1)
	configured += `
[model_providers.switchboard]
# ` + codexNote + `
# switchboard-saved model = "gpt-5-codex"
# switchboard-saved model_provider
# switchboard-key-id abc123
name = "Switchboard"
base_url = "` + testGateway + `/v1"
wire_api = "responses"
experimental_bearer_token = "` + createdKey + `"
`
	assert.Equal(t, configured, readCodexConfig(t, path))

	w, st = serve(t, h, http.MethodDelete, "127.0.0.1:5000", ``, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, false, st["configured"])
	assert.Equal(t, strings.Replace(codexUserConfig, `model = "gpt-5-codex"   # the default`, `model = "gpt-5-codex" # the default`, 1),
		readCodexConfig(t, path))
}

// Our table between the user's, written in any header form, goes with the
// tables under it; the comment that leads the next table stays. A table an
// earlier release wrote saved nothing: the model and model_provider it set
// go.
func TestCodexSettingsUnconfigureRemovesOurTablesInAnyForm(t *testing.T) {
	h, _, path := newCodexHandler(t)
	before := "model_provider = \"switchboard\"\nmodel = \"m\"\n\n[projects.\"/srv/a\"]\ntrust_level = \"trusted\"\n\n"
	after := "# my docs server\n[mcp_servers.docs]\ncommand = \"docs\"\n"
	writeCodexConfig(t, path, before+
		"[ model_providers . \"switchboard\" ]  # ours\nname = \"Switchboard\"\nbase_url = \"x\"\n\n"+
		"[model_providers.switchboard.http_headers]\nX-Team = \"a\"\n\n"+
		after)

	w, _ := serve(t, h, http.MethodDelete, "127.0.0.1:5000", ``, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, strings.TrimPrefix(before, "model_provider = \"switchboard\"\nmodel = \"m\"\n\n")+after, readCodexConfig(t, path))
}

// A status read finds our table and keys only where TOML puts them: a
// multi-line string that holds their text configures nothing.
func TestCodexSettingsStatusIgnoresLookalikesInStrings(t *testing.T) {
	h, _, path := newCodexHandler(t)
	writeCodexConfig(t, path, "developer_instructions = '''\nmodel_provider = \"switchboard\"\n[model_providers.switchboard]\nbase_url = \""+testGateway+"/v1\"\n'''\n")
	w, st := serve(t, h, http.MethodGet, "127.0.0.1:5000", ``, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, false, st["configured"])
	assert.Equal(t, false, st["hasKey"])
}

// A file written with CRLF line endings keeps them.
func TestCodexSettingsKeepCRLFLineEndings(t *testing.T) {
	h, _, path := newCodexHandler(t)
	writeCodexConfig(t, path, "model = \"gpt-5\"\r\n\r\n[projects.\"C:\\\\src\\\\app\"]\r\ntrust_level = \"trusted\"\r\n")
	w, _ := serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"m","apiKey":"sk-x"}`, true)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	got := readCodexConfig(t, path)
	assert.NotContains(t, strings.ReplaceAll(got, "\r\n", ""), "\n", "every line ends with CRLF")
	assert.True(t, strings.HasPrefix(got, "model = \"m\"\r\nmodel_provider = \"switchboard\"\r\n\r\n[projects.\"C:\\\\src\\\\app\"]\r\ntrust_level = \"trusted\"\r\n\r\n[model_providers.switchboard]\r\n"), "%q", got)
}

func TestTOMLHeaders(t *testing.T) {
	for _, tc := range []struct {
		line  string
		path  []string
		array bool
	}{
		{`[model_providers.switchboard]`, []string{"model_providers", "switchboard"}, false},
		{`  [ model_providers . "switchboard" ]   # ours`, []string{"model_providers", "switchboard"}, false},
		{`[projects."/home/me/app"]`, []string{"projects", "/home/me/app"}, false},
		{`[projects."C:\\src\\app"]`, []string{"projects", `C:\src\app`}, false},
		{`[projects.'/a/]b#c']`, []string{"projects", "/a/]b#c"}, false},
		{`[projects."\u00e9t\u00e9"]`, []string{"projects", "été"}, false},
		{`[[mcp_servers.docs.tools]] # list`, []string{"mcp_servers", "docs", "tools"}, true},
		{`[a] b = 1`, nil, false},
		{`[a`, nil, false},
		{`[[a]`, nil, true},
		{`[a.]`, nil, false},
	} {
		info, _ := scanTOML([]string{tc.line})
		assert.Equal(t, lineHeader, info[0].kind, tc.line)
		assert.Equal(t, tc.path, info[0].path, tc.line)
		assert.Equal(t, tc.array, info[0].array, tc.line)
	}
}

func TestTOMLUnquote(t *testing.T) {
	for raw, want := range map[string]string{
		`"a \"b\" \\ c"`: `a "b" \ c`,
		`'C:\path'`:      `C:\path`,
		`"caf\u00e9"`:    "café",
		`"a" "b"`:        "",
		`"""x"""`:        "",
		`1`:              "",
		`"open`:          "",
	} {
		assert.Equal(t, want, tomlUnquote(raw), raw)
	}
}

// FuzzTOMLEdit: editing any file the editor accepts keeps every line
// outside our table and keys, in order, and the result reads back with our
// table once and our keys at the top.
func FuzzTOMLEdit(f *testing.F) {
	f.Add([]byte(userCodexConfig))
	f.Add([]byte(codexUserConfig))
	f.Add([]byte("[a]\nb = 1\n"))
	f.Add([]byte("[projects.\"/x\"]\ntrust_level = \"trusted\"\n[model_providers.switchboard]\nname = 1\n"))
	f.Add([]byte(""))
	f.Add([]byte("#\r"))
	f.Add([]byte("\ufeff# settings\nmodel = \"gpt-5\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := parseTOML(data)
		if d.check() != nil {
			return
		}
		before := d.info()
		var kept []string
		start, end, ours := tableRange(before, tablePath(codexTable))
		top := topEnd(before)
		for i, l := range d.lines {
			if ours && i >= start && i < end {
				continue
			}
			if i < top && before[i].kind == lineKey && len(before[i].path) == 1 && before[i].path[0] == "model_provider" {
				continue
			}
			kept = append(kept, l)
		}
		d.setTop("model_provider", `"switchboard"`)
		d.setTable(codexTable, nil, [][2]string{{"wire_api", `"responses"`}})
		out := parseTOML(d.bytes())
		require.NoError(t, out.check())
		v, ok := out.tableValue(codexTable, "wire_api")
		assert.True(t, ok)
		assert.Equal(t, `"responses"`, v)
		p, ok := out.topValue("model_provider")
		assert.True(t, ok)
		assert.Equal(t, `"switchboard"`, p)
		n := 0
		for _, l := range out.info() {
			if l.kind == lineHeader && strings.Join(l.path, ".") == codexTable && !l.array {
				n++
			}
		}
		assert.Equal(t, 1, n)
		// The user's lines are all there, in order.
		j := 0
		for _, l := range out.lines {
			if j < len(kept) && l == kept[j] {
				j++
			}
		}
		for j < len(kept) && strings.TrimSpace(kept[j]) == "" {
			j++ // trailing blank lines are trimmed
		}
		if j < len(kept) {
			t.Errorf("a user's line is missing: %q", kept[j])
		}
	})
}

// A config.toml saved with a UTF-8 byte-order mark (Windows editors write
// one; Codex's TOML reader skips it) is configured like any other and keeps
// its mark.
func TestCodexSettingsKeepAByteOrderMark(t *testing.T) {
	h, _, path := newCodexHandler(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	cfg := "\ufeff# my settings\nmodel = \"gpt-5\"\n\n[projects.\"/home/me/x\"]\ntrust_level = \"trusted\"\n"
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))

	w, _ := serve(t, h, http.MethodGet, "127.0.0.1:5000", "", true)
	require.Equal(t, http.StatusOK, w.Code, "GET: %s", w.Body.String())
	w, st := serve(t, h, http.MethodPost, "127.0.0.1:5000", `{"model":"openai/gpt-5-codex"}`, true)
	require.Equal(t, http.StatusOK, w.Code, "POST: %s", w.Body.String())
	assert.Equal(t, true, st["configured"])
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "\ufeff# my settings\n"), "%q", data)
	assert.Equal(t, 1, strings.Count(string(data), "\ufeff"))
	assert.Contains(t, string(data), "[projects.\"/home/me/x\"]\ntrust_level = \"trusted\"")
}
