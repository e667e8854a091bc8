package node_test

import (
	"context"
	"fmt"
	"net/http"
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

// TestConsoleJourneys walks the console in a real browser as an operator
// would: sign in with the one-time link, add a compatible provider and see
// its models, issue a key and use it with the official client, find the
// request in the log and the charts, watch a connection cool and clear it,
// log in with a device code, change settings, and revoke the key.
func TestConsoleJourneys(t *testing.T) {
	b := nodetest.StartBrowser(t)
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
	b.GoTo(ui + "#/signin?code=" + code)
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})
	assert.Contains(t, b.Do(map[string]any{"op": "session"}).(string), nodetest.AdminToken, "the token is kept in sessionStorage")
	assert.NotContains(t, b.Do(map[string]any{"op": "hash"}).(string), code, "the used code leaves the address bar")
	again := sb.Do(t, http.MethodPost, "/api/console/sign-in", map[string]any{"code": code})
	assert.Equal(t, http.StatusUnauthorized, again.Status, "a sign-in code works once: %s", again.Body)

	// Add a compatible provider pointing at the fake upstream, validate it,
	// and list its models.
	b.Do(map[string]any{"op": "select", "label": "Provider", "value": "openai-compatible"})
	b.Fill("Suffix", "local")
	b.Fill("Name", "local")
	b.Fill("Base URL", up.URL())
	b.Fill("Prefix", "local")
	b.Click("button", "Validate")
	b.WaitText("Valid (")
	b.Click("button", "Add connection")
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local"})
	b.Click("button", "Models of local")
	b.WaitText("qwen2.5-coder")
	b.Shot("providers")
	assert.Contains(t, b.Text(), "3 models")

	// Edit it: a new priority and enabled-models list reach the API.
	b.Click("button", "Edit local")
	b.Fill("Priority", "3")
	b.Fill("Enabled models", "llama3, qwen2.5-coder")
	b.Click("button", "Save")
	b.WaitText("local saved.")
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any)
	require.Len(t, conns, 1)
	edited := conns[0].(map[string]any)
	assert.EqualValues(t, 3, edited["priority"])
	assert.Equal(t, []any{"llama3", "qwen2.5-coder"}, edited["providerSpecificData"].(map[string]any)["enabledModels"])
	sb.Admin(t, http.MethodPatch, "/api/providers/"+edited["id"].(string), map[string]any{
		"providerSpecificData": map[string]any{"enabledModels": []string{}}})

	b.GoTo(ui + "#/models")
	b.WaitText("local/llama3")
	b.Shot("models")
	b.Fill("Filter models", "coder")
	b.Do(map[string]any{"op": "wait", "text": "local/llama3", "state": "hidden"})
	assert.Contains(t, b.Text(), "local/qwen2.5-coder")

	// Issue a key, shown once with a copy button, and use it with the
	// official client.
	b.GoTo(ui + "#/keys")
	b.Fill("Key name", "laptop")
	b.Click("button", "Issue key")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Copy"})
	key := b.Do(map[string]any{"op": "value", "label": "New API key"}).(string)
	require.True(t, strings.HasPrefix(key, "sk-"), "the issued key is shown: %q", key)
	b.Shot("keys")
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
	b.GoTo(ui + "#/usage")
	b.Do(map[string]any{"op": "wait", "selector": "table:has-text('laptop') td:has-text('llama3')"})
	log := b.Text()
	assert.Contains(t, log, "Request log")
	assert.Contains(t, log, "200")
	bars := b.Do(map[string]any{"op": "count", "selector": "svg rect title:has-text('local')"})
	assert.Positive(t, bars, "the charts draw the request")
	b.Shot("usage")
	b.Do(map[string]any{"op": "select", "label": "Status", "value": "error"})
	b.Click("button", "Apply filters")
	b.WaitText("0 requests shown")
	b.Do(map[string]any{"op": "select", "label": "Status", "value": ""})
	b.Do(map[string]any{"op": "select", "label": "Key", "value": "laptop"}) // by its label
	b.Click("button", "Apply filters")
	b.WaitText("1 requests shown")
	// What the log read is counted in the stream's messages, each of which
	// may carry a batch of events.
	assert.Regexp(t, `1 requests shown \(\d+ usage stream messages read\)`, b.Text())

	// Cool the connection (the upstream answers 429) and clear it.
	up.Enqueue(pathChat, upstreamtest.RateLimited("120"))
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "local/llama3", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	b.GoTo(ui + "#/health")
	row := "tr[data-connection='local']"
	b.Do(map[string]any{"op": "wait", "within": row, "text": "cooling"})
	health := b.Do(map[string]any{"op": "text", "selector": row}).(string)
	assert.Contains(t, health, "left")
	assert.Contains(t, health, "429")
	b.Shot("health")
	b.Click("button", "Clear cooldowns of local", row)
	b.Do(map[string]any{"op": "wait", "within": row, "text": "active"})
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "local/llama3", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("served again")},
	})
	require.NoError(t, err, "a cleared connection serves at once")

	// A device login: the code and its link are shown, polling runs until
	// the fake authorization server approves.
	b.GoTo(ui + "#/providers")
	b.Click("button", "Log in to qwen")
	b.WaitText("User code: " + fakeUserCode)
	link := b.Do(map[string]any{"op": "attr", "role": "link", "name": f.URL + "/device?user_code=" + fakeUserCode, "attr": "href"})
	assert.Equal(t, f.URL+"/device?user_code="+fakeUserCode, link)
	b.Shot("device-login")
	b.WaitText("Logged in: the connection qwen was added.")
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable qwen"})
	assert.GreaterOrEqual(t, f.tokenPolls(), 2, "the console polled until the login completed")

	// The authorization-code login (Codex): the console shows the sign-in
	// link, the operator pastes the address the browser lands on.
	b.Click("button", "Log in to codex")
	authorize := b.Do(map[string]any{"op": "attr", "role": "link", "name": "Open the codex sign-in page", "attr": "href"}).(string)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	consent, err := noFollow.Get(authorize)
	require.NoError(t, err)
	consent.Body.Close()
	require.Equal(t, http.StatusFound, consent.StatusCode)
	b.Fill("Redirect address or code", consent.Header.Get("Location"))
	b.Click("button", "Finish login")
	b.WaitText("Logged in: the connection codex was added.")
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable codex"})

	// Logging in to the same account again renews its connection.
	b.Click("button", "Log in to codex")
	authorize = b.Do(map[string]any{"op": "attr", "role": "link", "name": "Open the codex sign-in page", "attr": "href"}).(string)
	consent, err = noFollow.Get(authorize)
	require.NoError(t, err)
	consent.Body.Close()
	require.Equal(t, http.StatusFound, consent.StatusCode)
	b.Fill("Redirect address or code", consent.Header.Get("Location"))
	b.Click("button", "Finish login")
	b.WaitText("Logged in again: the connection codex was renewed, its settings kept.")

	// Thousands of models stay paged: the listing draws one page.
	var many []string
	for i := range 3000 {
		many = append(many, fmt.Sprintf("m-%04d", i))
	}
	big := upstreamtest.New(t, upstreamtest.WithModels(many...))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-big", "name": "big",
		"providerSpecificData": map[string]any{"baseUrl": big.URL(), "prefix": "big"}})
	b.GoTo(ui + "#/models")
	b.WaitText("big/m-0000")
	assert.Regexp(t, `All \(30\d\d\)`, b.Text(), "every model is counted")
	rows := b.Do(map[string]any{"op": "count", "selector": "section[aria-labelledby='list-h'] tbody tr"})
	assert.EqualValues(t, 50, rows, "one page of rows in the document")
	b.Fill("Filter models", "m-2999")
	b.WaitText("big/m-2999")
	assert.Contains(t, b.Text(), "(1 items)")

	// Settings.
	b.GoTo(ui + "#/settings")
	b.Do(map[string]any{"op": "check", "label": "Terse answers (caveman)", "checked": true})
	b.Do(map[string]any{"op": "select", "label": "Caveman level", "value": "ultra"})
	b.Do(map[string]any{"op": "select", "label": "Routing strategy", "value": "round-robin"})
	b.Click("button", "Save settings")
	b.WaitText("Settings saved.")
	b.Shot("settings")
	s := sb.Admin(t, http.MethodGet, "/api/settings", nil)
	assert.Equal(t, true, s.JSON["cavemanEnabled"])
	assert.Equal(t, "ultra", s.JSON["cavemanLevel"])
	assert.Equal(t, "round-robin", s.JSON["routingStrategy"])

	b.GoTo(ui + "#/billing")
	b.WaitText("Billing is not configured on this gateway")
	b.Shot("billing")

	// Revoke the key: the client is refused.
	b.GoTo(ui + "#/keys")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Revoke laptop"})
	b.Do(map[string]any{"op": "acceptDialogs"})
	b.Click("button", "Revoke laptop")
	b.WaitText("laptop revoked.")
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
	b.Do(map[string]any{"op": "hold", "url": "**/api/keys"})
	b.Do(map[string]any{"op": "reload"})
	b.GoTo(ui + "#/providers")
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local"})
	assert.EqualValues(t, 1, b.Do(map[string]any{"op": "release"}), "the keys page's request was held")
	assert.Equal(t, "Providers", b.Do(map[string]any{"op": "text", "selector": "main h1"}), "a page that loaded late stays out")
	b.Do(map[string]any{"op": "select", "label": "Machine", "value": team.JSON["machine"].(map[string]any)["id"].(string)})
	b.WaitText("Nothing yet.") // team-b has no connections
	assert.NotContains(t, b.Text(), "openai-compatible-local")
	b.Do(map[string]any{"op": "select", "label": "Machine", "value": ""})
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local"})
	b.GoTo(ui + "#/keys")

	// Keyboard: the first Tab reaches the skip link, and the nav links are
	// reachable.
	b.Do(map[string]any{"op": "reload"})
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Keys"})
	b.Do(map[string]any{"op": "press", "key": "Tab"})
	assert.Contains(t, b.Do(map[string]any{"op": "focused"}).(string), "Skip to content")

	// Signing out forgets the token; a wrong token is refused with a message.
	b.Click("button", "Sign out")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Sign in to Switchboard"})
	assert.NotContains(t, b.Do(map[string]any{"op": "session"}).(string), nodetest.AdminToken)
	b.Fill("Admin token", "not-the-token-0000")
	b.Click("button", "Sign in")
	b.WaitText("That admin token is not valid.")
	b.Shot("signin")
	b.Fill("Admin token", nodetest.AdminToken)
	b.Click("button", "Sign in")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})

	assert.Empty(t, b.Do(map[string]any{"op": "problems"}), "no script errors or CSP violations")
}

// The console says why an OAuth connection's refresh failed, and when, on
// its row of the providers page and of the health page.
func TestConsoleShowsWhyARefreshFailed(t *testing.T) {
	b := nodetest.StartBrowser(t)
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
	b.GoTo(ui + "#/signin?code=" + mint.JSON["code"].(string))
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})
	row := "tr:has-text('" + id + "')"
	b.Do(map[string]any{"op": "wait", "within": row, "text": "invalid_grant"})
	shown := b.Do(map[string]any{"op": "text", "selector": row}).(string)
	assert.Contains(t, shown, "needs re-login")
	assert.Contains(t, shown, "Refresh error (")
	assert.Contains(t, shown, "ago")
	b.Shot("refresh-error")

	b.GoTo(ui + "#/health")
	b.Do(map[string]any{"op": "wait", "within": "tr[data-connection='o']", "text": "invalid_grant"})
	assert.Empty(t, b.Do(map[string]any{"op": "problems"}), "no script errors or CSP violations")
}
