package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// chromiumPath is Debian's chromium, which the console tests drive.
const chromiumPath = "/usr/bin/chromium"

// consoleShotsEnv names a directory for the console's screenshots (test
// artefacts); without it they go to a temporary directory.
const consoleShotsEnv = "SWITCHBOARD_CONSOLE_SCREENSHOTS"

// browser is a headless chromium driven through node/testdata/node/console.mjs.
type browser struct {
	t     *testing.T
	in    io.WriteCloser
	out   *bufio.Scanner
	shots string
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	dir := nodetest.NPM(t)
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is missing on CI: %v", err)
		}
		t.Skipf("chromium not installed (apt-get install chromium; CI=true fails instead): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", "console.mjs")
	cmd.Dir = dir
	cmd.Stderr = &testWriter{t: t}
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_, _ = io.WriteString(in, `{"op":"close"}`+"\n")
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	shots := os.Getenv(consoleShotsEnv)
	if shots == "" {
		shots = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(shots, 0o755))
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	return &browser{t: t, in: in, out: sc, shots: shots}
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("browser: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// try runs one command and answers its value or error.
func (b *browser) try(cmd map[string]any) (any, error) {
	b.t.Helper()
	line, err := json.Marshal(cmd)
	require.NoError(b.t, err)
	_, err = b.in.Write(append(line, '\n'))
	require.NoError(b.t, err)
	type answer struct {
		OK    bool   `json:"ok"`
		Value any    `json:"value"`
		Error string `json:"error"`
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		if b.out.Scan() {
			_ = json.Unmarshal(b.out.Bytes(), &a)
		} else {
			a.Error = "the browser driver exited"
		}
		got <- a
	}()
	select {
	case a := <-got:
		if !a.OK {
			return nil, errors.New(a.Error)
		}
		return a.Value, nil
	case <-time.After(90 * time.Second):
		b.t.Fatalf("the browser did not answer %s", line)
		return nil, nil
	}
}

// do runs a command that must succeed; on failure it saves a screenshot.
func (b *browser) do(cmd map[string]any) any {
	b.t.Helper()
	v, err := b.try(cmd)
	if err != nil {
		path := filepath.Join(b.shots, "failure.png")
		_, _ = b.try(map[string]any{"op": "screenshot", "path": path})
		problems, _ := b.try(map[string]any{"op": "problems"})
		b.t.Fatalf("browser %v: %v (screenshot %s; page problems %v)", cmd, err, path, problems)
	}
	return v
}

func (b *browser) text() string    { return b.do(map[string]any{"op": "text"}).(string) }
func (b *browser) goTo(url string) { b.do(map[string]any{"op": "goto", "url": url}) }
func (b *browser) waitText(text string) {
	b.t.Helper()
	b.do(map[string]any{"op": "wait", "text": text})
}
func (b *browser) click(role, name string, within ...string) {
	b.t.Helper()
	cmd := map[string]any{"op": "click", "role": role, "name": name}
	if len(within) > 0 {
		cmd["within"] = within[0]
	}
	b.do(cmd)
}
func (b *browser) fill(label, value string) {
	b.t.Helper()
	b.do(map[string]any{"op": "fill", "label": label, "value": value})
}
func (b *browser) shot(name string) {
	b.t.Helper()
	path := filepath.Join(b.shots, name+".png")
	b.do(map[string]any{"op": "screenshot", "path": path})
	b.t.Logf("screenshot %s", path)
}

// TestConsoleJourneys walks the console in a real browser as an operator
// would: sign in with the one-time link, add a compatible provider and see
// its models, issue a key and use it with the official client, find the
// request in the log and the charts, watch a connection cool and clear it,
// log in with a device code, change settings, and revoke the key.
func TestConsoleJourneys(t *testing.T) {
	b := startBrowser(t)
	up := upstreamtest.New(t, upstreamtest.WithModels("llama3", "qwen2.5-coder", "nomic-embed-text"))
	f := newFakeAuthServer(t, oauth.CodePending, pollOK)
	f.resourceURL = up.URL()
	sb := serveWithOAuth(t, f, "")
	ui := sb.BaseURL + "/ui/"

	t.Run("console is served with a strict CSP", func(t *testing.T) {
		resp := sb.Do(t, http.MethodGet, "/ui/", nil)
		require.Equal(t, http.StatusOK, resp.Status)
		csp := resp.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "script-src 'self'")
		assert.NotContains(t, csp, "unsafe-inline")
		assert.Contains(t, string(resp.Body), `<script type="module" src="app.js">`)
		assert.NotContains(t, string(resp.Body), "<script>", "no inline scripts")
	})

	// Sign in with a one-time link, as `go run .` prints it.
	mint := sb.Admin(t, http.MethodPost, "/api/console/sign-in-codes", map[string]any{})
	require.Equal(t, http.StatusCreated, mint.Status, "%s", mint.Body)
	code := mint.JSON["code"].(string)
	b.goTo(ui + "#/signin?code=" + code)
	b.do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})
	assert.Contains(t, b.do(map[string]any{"op": "session"}).(string), nodetest.AdminToken, "the token is kept in sessionStorage")
	assert.NotContains(t, b.do(map[string]any{"op": "hash"}).(string), code, "the used code leaves the address bar")
	again := sb.Do(t, http.MethodPost, "/api/console/sign-in", map[string]any{"code": code})
	assert.Equal(t, http.StatusUnauthorized, again.Status, "a sign-in code works once: %s", again.Body)

	// Add a compatible provider pointing at the fake upstream, validate it,
	// and list its models.
	b.do(map[string]any{"op": "select", "label": "Provider", "value": "openai-compatible"})
	b.fill("Suffix", "local")
	b.fill("Name", "local")
	b.fill("Base URL", up.URL())
	b.fill("Prefix", "local")
	b.click("button", "Validate")
	b.waitText("Valid (")
	b.click("button", "Add connection")
	b.do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local"})
	b.click("button", "Models of local")
	b.waitText("qwen2.5-coder")
	b.shot("providers")
	assert.Contains(t, b.text(), "3 models")

	// Edit it: a new priority and enabled-models list reach the API.
	b.click("button", "Edit local")
	b.fill("Priority", "3")
	b.fill("Enabled models", "llama3, qwen2.5-coder")
	b.click("button", "Save")
	b.waitText("local saved.")
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any)
	require.Len(t, conns, 1)
	edited := conns[0].(map[string]any)
	assert.EqualValues(t, 3, edited["priority"])
	assert.Equal(t, []any{"llama3", "qwen2.5-coder"}, edited["providerSpecificData"].(map[string]any)["enabledModels"])
	sb.Admin(t, http.MethodPatch, "/api/providers/"+edited["id"].(string), map[string]any{
		"providerSpecificData": map[string]any{"enabledModels": []string{}}})

	b.goTo(ui + "#/models")
	b.waitText("local/llama3")
	b.shot("models")
	b.fill("Filter models", "coder")
	b.do(map[string]any{"op": "wait", "text": "local/llama3", "state": "hidden"})
	assert.Contains(t, b.text(), "local/qwen2.5-coder")

	// Issue a key, shown once with a copy button, and use it with the
	// official client.
	b.goTo(ui + "#/keys")
	b.fill("Key name", "laptop")
	b.click("button", "Issue key")
	b.do(map[string]any{"op": "wait", "role": "button", "name": "Copy"})
	key := b.do(map[string]any{"op": "value", "label": "New API key"}).(string)
	require.True(t, strings.HasPrefix(key, "sk-"), "the issued key is shown: %q", key)
	b.shot("keys")
	client := openai.NewClient(option.WithBaseURL(sb.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	completion, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "local/llama3", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello from the console test")},
	})
	require.NoError(t, err)
	require.NotEmpty(t, completion.Choices)

	// The request appears in the log and the charts once rolled up.
	require.Eventually(t, func() bool {
		s := sb.Admin(t, http.MethodGet, "/api/usage/stats?period=24h", nil)
		tot, _ := s.JSON["totals"].(map[string]any)
		return tot != nil && tot["requests"] == float64(1)
	}, 30*time.Second, 100*time.Millisecond, "the usage worker rolls the request up")
	b.goTo(ui + "#/usage")
	b.do(map[string]any{"op": "wait", "selector": "table:has-text('laptop') td:has-text('llama3')"})
	log := b.text()
	assert.Contains(t, log, "Request log")
	assert.Contains(t, log, "200")
	bars := b.do(map[string]any{"op": "count", "selector": "svg rect title:has-text('local')"})
	assert.Positive(t, bars, "the charts draw the request")
	b.shot("usage")
	b.do(map[string]any{"op": "select", "label": "Status", "value": "error"})
	b.click("button", "Apply filters")
	b.waitText("0 requests shown")
	b.do(map[string]any{"op": "select", "label": "Status", "value": ""})
	b.do(map[string]any{"op": "select", "label": "Key", "value": "laptop"}) // by its label
	b.click("button", "Apply filters")
	b.waitText("1 requests shown")
	// What the log read is counted in the stream's messages, each of which
	// may carry a batch of events.
	assert.Regexp(t, `1 requests shown \(\d+ usage stream messages read\)`, b.text())

	// Cool the connection (the upstream answers 429) and clear it.
	up.Enqueue(pathChat, upstreamtest.RateLimited("120"))
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "local/llama3", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	b.goTo(ui + "#/health")
	row := "tr[data-connection='local']"
	b.do(map[string]any{"op": "wait", "within": row, "text": "cooling"})
	health := b.do(map[string]any{"op": "text", "selector": row}).(string)
	assert.Contains(t, health, "left")
	assert.Contains(t, health, "429")
	b.shot("health")
	b.click("button", "Clear cooldowns of local", row)
	b.do(map[string]any{"op": "wait", "within": row, "text": "active"})
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "local/llama3", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("served again")},
	})
	require.NoError(t, err, "a cleared connection serves at once")

	// A device login: the code and its link are shown, polling runs until
	// the fake authorization server approves.
	b.goTo(ui + "#/providers")
	b.click("button", "Log in to qwen")
	b.waitText("User code: " + fakeUserCode)
	link := b.do(map[string]any{"op": "attr", "role": "link", "name": f.URL + "/device?user_code=" + fakeUserCode, "attr": "href"})
	assert.Equal(t, f.URL+"/device?user_code="+fakeUserCode, link)
	b.shot("device-login")
	b.waitText("Logged in: the connection qwen was added.")
	b.do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable qwen"})
	assert.GreaterOrEqual(t, f.tokenPolls(), 2, "the console polled until the login completed")

	// The authorization-code login (Codex): the console shows the sign-in
	// link, the operator pastes the address the browser lands on.
	b.click("button", "Log in to codex")
	authorize := b.do(map[string]any{"op": "attr", "role": "link", "name": "Open the codex sign-in page", "attr": "href"}).(string)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	consent, err := noFollow.Get(authorize)
	require.NoError(t, err)
	consent.Body.Close()
	require.Equal(t, http.StatusFound, consent.StatusCode)
	b.fill("Redirect address or code", consent.Header.Get("Location"))
	b.click("button", "Finish login")
	b.waitText("Logged in: the connection codex was added.")
	b.do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable codex"})

	// Logging in to the same account again renews its connection.
	b.click("button", "Log in to codex")
	authorize = b.do(map[string]any{"op": "attr", "role": "link", "name": "Open the codex sign-in page", "attr": "href"}).(string)
	consent, err = noFollow.Get(authorize)
	require.NoError(t, err)
	consent.Body.Close()
	require.Equal(t, http.StatusFound, consent.StatusCode)
	b.fill("Redirect address or code", consent.Header.Get("Location"))
	b.click("button", "Finish login")
	b.waitText("Logged in again: the connection codex was renewed, its settings kept.")

	// Thousands of models stay paged: the listing draws one page.
	var many []string
	for i := range 3000 {
		many = append(many, fmt.Sprintf("m-%04d", i))
	}
	big := upstreamtest.New(t, upstreamtest.WithModels(many...))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-big", "name": "big",
		"providerSpecificData": map[string]any{"baseUrl": big.URL(), "prefix": "big"}})
	b.goTo(ui + "#/models")
	b.waitText("big/m-0000")
	assert.Regexp(t, `All \(30\d\d\)`, b.text(), "every model is counted")
	rows := b.do(map[string]any{"op": "count", "selector": "section[aria-labelledby='list-h'] tbody tr"})
	assert.EqualValues(t, 50, rows, "one page of rows in the document")
	b.fill("Filter models", "m-2999")
	b.waitText("big/m-2999")
	assert.Contains(t, b.text(), "(1 items)")

	// Settings.
	b.goTo(ui + "#/settings")
	b.do(map[string]any{"op": "check", "label": "Terse answers (caveman)", "checked": true})
	b.do(map[string]any{"op": "select", "label": "Caveman level", "value": "ultra"})
	b.do(map[string]any{"op": "select", "label": "Routing strategy", "value": "round-robin"})
	b.click("button", "Save settings")
	b.waitText("Settings saved.")
	b.shot("settings")
	s := sb.Admin(t, http.MethodGet, "/api/settings", nil)
	assert.Equal(t, true, s.JSON["cavemanEnabled"])
	assert.Equal(t, "ultra", s.JSON["cavemanLevel"])
	assert.Equal(t, "round-robin", s.JSON["routingStrategy"])

	b.goTo(ui + "#/billing")
	b.waitText("Billing is not configured on this gateway")
	b.shot("billing")

	// Revoke the key: the client is refused.
	b.goTo(ui + "#/keys")
	b.do(map[string]any{"op": "wait", "role": "button", "name": "Revoke laptop"})
	b.do(map[string]any{"op": "acceptDialogs"})
	b.click("button", "Revoke laptop")
	b.waitText("laptop revoked.")
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "local/llama3", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("revoked")},
	})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)

	// The machine picker: pages act on the chosen machine (tenant).
	team := sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "team-b"})
	require.Equal(t, http.StatusCreated, team.Status, "%s", team.Body)
	// The reload starts on the keys page, whose list is held back until the
	// operator has moved on to the providers page: the late keys page must
	// not replace it.
	b.do(map[string]any{"op": "hold", "url": "**/api/keys"})
	b.do(map[string]any{"op": "reload"})
	b.goTo(ui + "#/providers")
	b.do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local"})
	assert.EqualValues(t, 1, b.do(map[string]any{"op": "release"}), "the keys page's request was held")
	assert.Equal(t, "Providers", b.do(map[string]any{"op": "text", "selector": "main h1"}), "a page that loaded late stays out")
	b.do(map[string]any{"op": "select", "label": "Machine", "value": team.JSON["machine"].(map[string]any)["id"].(string)})
	b.waitText("Nothing yet.") // team-b has no connections
	assert.NotContains(t, b.text(), "openai-compatible-local")
	b.do(map[string]any{"op": "select", "label": "Machine", "value": ""})
	b.do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local"})
	b.goTo(ui + "#/keys")

	// Keyboard: the first Tab reaches the skip link, and the nav links are
	// reachable.
	b.do(map[string]any{"op": "reload"})
	b.do(map[string]any{"op": "wait", "role": "heading", "name": "Keys"})
	b.do(map[string]any{"op": "press", "key": "Tab"})
	assert.Contains(t, b.do(map[string]any{"op": "focused"}).(string), "Skip to content")

	// Signing out forgets the token; a wrong token is refused with a message.
	b.click("button", "Sign out")
	b.do(map[string]any{"op": "wait", "role": "heading", "name": "Sign in to Switchboard"})
	assert.NotContains(t, b.do(map[string]any{"op": "session"}).(string), nodetest.AdminToken)
	b.fill("Admin token", "not-the-token-0000")
	b.click("button", "Sign in")
	b.waitText("That admin token is not valid.")
	b.shot("signin")
	b.fill("Admin token", nodetest.AdminToken)
	b.click("button", "Sign in")
	b.do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})

	assert.Empty(t, b.do(map[string]any{"op": "problems"}), "no script errors or CSP violations")
}

// The console says why an OAuth connection's refresh failed, and when, on
// its row of the providers page and of the health page.
func TestConsoleShowsWhyARefreshFailed(t *testing.T) {
	b := startBrowser(t)
	up := upstreamtest.New(t, upstreamtest.WithAPIKey(oauthNewAccess))
	tokens := newFakeTokenEndpoint(t, tokenAnswer{status: http.StatusBadRequest, body: `{"error":"invalid_grant"}`})
	sb := nodetest.Serve(t, t.TempDir())
	id := createOAuthConnection(t, sb, up.URL(), tokens.URL())
	embed(t, sb)
	require.Eventually(t, func() bool {
		return connection(t, sb, id)["needsRelogin"] == true
	}, 10*time.Second, 20*time.Millisecond)

	mint := sb.Admin(t, http.MethodPost, "/api/console/sign-in-codes", map[string]any{})
	require.Equal(t, http.StatusCreated, mint.Status, "%s", mint.Body)
	ui := sb.BaseURL + "/ui/"
	b.goTo(ui + "#/signin?code=" + mint.JSON["code"].(string))
	b.do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})
	row := "tr:has-text('" + id + "')"
	b.do(map[string]any{"op": "wait", "within": row, "text": "invalid_grant"})
	shown := b.do(map[string]any{"op": "text", "selector": row}).(string)
	assert.Contains(t, shown, "needs re-login")
	assert.Contains(t, shown, "Refresh error (")
	assert.Contains(t, shown, "ago")
	b.shot("refresh-error")

	b.goTo(ui + "#/health")
	b.do(map[string]any{"op": "wait", "within": "tr[data-connection='o']", "text": "invalid_grant"})
	assert.Empty(t, b.do(map[string]any{"op": "problems"}), "no script errors or CSP violations")
}
