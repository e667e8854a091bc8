package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/upstreamtest"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// consoleWithLocal runs the service with one compatible connection,
// local, on a fake upstream, and signs the browser in to its console with
// a one-time link; it answers the console's address.
func consoleWithLocal(t *testing.T, b *nodetest.Browser) (*nodetest.Instance, string) {
	t.Helper()
	up := upstreamtest.New(t, upstreamtest.WithModels("llama3", "qwen2.5-coder"))
	sb := nodetest.Serve(t, t.TempDir())
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-local", "name": "local",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "local"}})
	mint := sb.Admin(t, http.MethodPost, "/api/console/sign-in-codes", map[string]any{})
	require.Equal(t, http.StatusCreated, mint.Status, "%s", mint.Body)
	ui := sb.BaseURL + "/ui/"
	b.GoTo(ui + "#/signin?code=" + mint.JSON["code"].(string))
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local"})
	return sb, ui
}

// chatLogged asks local/llama3 once and waits until the request log lists
// the request.
func chatLogged(t *testing.T, sb *nodetest.Instance) {
	t.Helper()
	resp := sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{
		"model": "local/llama3", "messages": []map[string]any{{"role": "user", "content": "hi"}}})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Eventually(t, func() bool {
		rows, _ := sb.Admin(t, http.MethodGet, "/api/usage/requests", nil).JSON["requests"].([]any)
		return len(rows) == 1
	}, 30*time.Second, 100*time.Millisecond)
}

// Testing one connection leaves what the operator was typing elsewhere on
// the providers page: the half-filled add form and an open edit form.
func TestConsoleProvidersKeepTypedFormsWhenAConnectionIsTested(t *testing.T) {
	b := nodetest.StartBrowser(t)
	consoleWithLocal(t, b)
	b.Fill("Name", "half-typed")
	b.Click("button", "Edit local")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Edit local"})
	b.Click("button", "Test local")
	b.WaitText("local: OK")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Test local"})
	assert.Equal(t, "half-typed", b.Do(map[string]any{"op": "value", "label": "Name", "within": "form[aria-labelledby='add-h']"}))
	assert.EqualValues(t, 1, b.Do(map[string]any{"op": "count", "selector": "form[aria-labelledby='edit-h']"}), "the edit form stays open")
	assert.Empty(t, b.Do(map[string]any{"op": "problems"}))
}

// A key just issued stays on screen, to be copied, when another key is
// revoked: it is shown this once.
func TestConsoleKeepsTheNewKeyShownWhenAnotherIsRevoked(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	old := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "old"})
	require.Equal(t, http.StatusCreated, old.Status, "%s", old.Body)
	b.GoTo(ui + "#/keys")
	b.Fill("Key name", "new")
	b.Click("button", "Issue key")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Copy"})
	key := b.Do(map[string]any{"op": "value", "label": "New API key"}).(string)
	b.Do(map[string]any{"op": "acceptDialogs"})
	b.Click("button", "Revoke old")
	b.WaitText("old revoked.")
	b.Do(map[string]any{"op": "wait", "text": "Keys (1)"})
	v, err := b.Try(map[string]any{"op": "value", "label": "New API key", "timeout": 2000})
	require.NoError(t, err, "the new key is still shown")
	assert.Equal(t, key, v)
}

// A keyboard user keeps their place: after an action the focus is on the
// button that did it (or, when its row went, on the page's content), never
// dropped to the document's body.
func TestConsoleKeepsFocusAfterActions(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	b.Do(map[string]any{"op": "focus", "role": "button", "name": "Test local"})
	b.Do(map[string]any{"op": "press", "key": "Enter"})
	b.WaitText("local: OK")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Test local"})
	assert.Equal(t, "button:Test local", b.Do(map[string]any{"op": "focused"}), "after a test")

	b.Fill("Name", "second")
	b.Do(map[string]any{"op": "select", "label": "Provider", "value": "openai-compatible"})
	b.Fill("Suffix", "second")
	b.Fill("Base URL", "http://127.0.0.1:9/v1")
	b.Do(map[string]any{"op": "focus", "role": "button", "name": "Add connection"})
	b.Do(map[string]any{"op": "press", "key": "Enter"})
	b.WaitText("Added second.")
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable second"})
	assert.Equal(t, "button:Add connection", b.Do(map[string]any{"op": "focused"}), "after adding")

	// The list read again after the save is slow: the notice waits for it
	// (and the focus with it), so what it announces is on screen.
	b.Click("button", "Edit local")
	b.Fill("Priority", "2")
	b.Do(map[string]any{"op": "hold", "url": "**/api/providers"})
	b.Do(map[string]any{"op": "press", "key": "Enter"})
	_, early := b.Try(map[string]any{"op": "wait", "text": "local saved.", "timeout": 1000})
	assert.Error(t, early, "the notice came before the list showed the save")
	assert.EqualValues(t, 1, b.Do(map[string]any{"op": "release"}), "the list's request was held")
	b.WaitText("local saved.")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Edit local", "state": "detached"})
	assert.Equal(t, "button:Edit local", b.Do(map[string]any{"op": "focused"}), "after saving an edit")
	b.Click("button", "Edit local")
	b.Click("button", "Cancel")
	assert.Equal(t, "button:Edit local", b.Do(map[string]any{"op": "focused"}), "after cancelling an edit")

	require.Equal(t, http.StatusCreated, sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "gone"}).Status)
	b.GoTo(ui + "#/keys")
	b.Do(map[string]any{"op": "acceptDialogs"})
	b.Do(map[string]any{"op": "focus", "role": "button", "name": "Revoke gone"})
	b.Do(map[string]any{"op": "press", "key": "Enter"})
	b.WaitText("gone revoked.")
	b.Do(map[string]any{"op": "wait", "text": "Keys (0)"})
	assert.NotContains(t, b.Do(map[string]any{"op": "eval", "expr": "document.activeElement.tagName"}), "BODY", "after a revoke")
	assert.Equal(t, true, b.Do(map[string]any{"op": "eval", "expr": "document.getElementById('main').contains(document.activeElement)"}), "after a revoke")
}

// Disabling a model from a filtered listing keeps the filter: the operator
// goes on from where they were.
func TestConsoleModelsKeepTheFilterAfterDisabling(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/models")
	b.WaitText("local/qwen2.5-coder")
	b.Click("button", "llm (2)")
	b.Fill("Filter models", "qwen")
	b.Do(map[string]any{"op": "wait", "text": "local/llama3", "state": "hidden"})
	b.Click("button", "Disable local/qwen2.5-coder")
	b.WaitText("local/qwen2.5-coder disabled.")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Enable local/qwen2.5-coder"})
	assert.Equal(t, "qwen", b.Do(map[string]any{"op": "value", "label": "Filter models"}))
	assert.Equal(t, "true", b.Do(map[string]any{"op": "attr", "role": "button", "name": "llm (1)", "attr": "aria-pressed"}))
}

// An action on the models page (a model disabled, an alias saved) redraws
// what it changed only: what the operator was typing in the alias and
// combo forms stays, and so does the focus, where the page was built anew
// and both were lost.
func TestConsoleModelsKeepTypedFormsAfterAnAction(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/models")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Disable local/qwen2.5-coder"})
	b.Fill("Filter models", "local")
	b.Fill("Alias", "fast")
	b.Fill("Model", "local/qwen2.5-coder")
	b.Fill("Combo name", "half")
	b.Fill("Models, in order", "local/ll")
	// The listing read again after the Disable is slow: the operator goes
	// on typing meanwhile.
	b.Do(map[string]any{"op": "hold", "url": "**/v1/models"})
	b.Click("button", "Disable local/qwen2.5-coder")
	b.Fill("Combo name", "halfway")
	assert.EqualValues(t, 1, b.Do(map[string]any{"op": "release"}), "the listing's request was held")
	b.WaitText("local/qwen2.5-coder disabled.")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Enable local/qwen2.5-coder"})
	focusedField := "document.querySelector(`label[for='${document.activeElement.id}']`)?.textContent || document.activeElement.tagName"
	assert.Equal(t, "Combo name", b.Do(map[string]any{"op": "eval", "expr": focusedField}), "the focus stays where the operator typed")
	for label, want := range map[string]string{"Filter models": "local", "Alias": "fast", "Model": "local/qwen2.5-coder", "Combo name": "halfway", "Models, in order": "local/ll"} {
		assert.Equal(t, want, b.Do(map[string]any{"op": "value", "label": label}), "after a Disable: %s", label)
	}

	b.Click("button", "Add alias")
	b.WaitText("Alias saved.")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Remove alias fast"})
	assert.Equal(t, "", b.Do(map[string]any{"op": "value", "label": "Alias"}), "the saved alias's form is emptied")
	assert.Equal(t, "halfway", b.Do(map[string]any{"op": "value", "label": "Combo name"}), "after saving an alias")
	assert.Equal(t, "local/ll", b.Do(map[string]any{"op": "value", "label": "Models, in order"}), "after saving an alias")
	assert.Empty(t, b.Do(map[string]any{"op": "problems"}))
}

// Aliases and combos saved elsewhere (another tab, the admin API) while
// the models page was open are kept when the page adds one.
func TestConsoleModelsKeepAliasesAndCombosSavedElsewhere(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/models")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Aliases"})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{
		"aliases": map[string]string{"elsewhere": "local/llama3"}}).Status)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{
		"combos": []map[string]any{{"name": "other-combo", "models": []string{"local/llama3"}}}}).Status)
	b.Fill("Alias", "fast")
	b.Fill("Model", "local/qwen2.5-coder")
	b.Click("button", "Add alias")
	b.WaitText("Alias saved.")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Remove alias fast"})
	b.Fill("Combo name", "best")
	b.Fill("Models, in order", "local/qwen2.5-coder, local/llama3")
	b.Click("button", "Add combo")
	b.WaitText("Combo saved.")
	aliases := sb.Admin(t, http.MethodGet, "/api/models/aliases", nil).JSON["aliases"]
	assert.Equal(t, map[string]any{"elsewhere": "local/llama3", "fast": "local/qwen2.5-coder"}, aliases)
	var names []string
	for _, c := range sb.Admin(t, http.MethodGet, "/api/models/combos", nil).JSON["combos"].([]any) {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"other-combo", "best"}, names)
	b.Do(map[string]any{"op": "wait", "text": "elsewhere"})
}

// The usage page's period and split are kept in its address: a reload (or
// a shared link) shows what was chosen.
func TestConsoleUsageKeepsItsChoicesInTheAddress(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/usage")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Over time"})
	b.Do(map[string]any{"op": "select", "label": "Period", "value": "7d"})
	b.Do(map[string]any{"op": "select", "label": "Split by", "value": "model"})
	b.Do(map[string]any{"op": "wait", "text": "Requests over time by model"})
	b.Do(map[string]any{"op": "reload"})
	b.Do(map[string]any{"op": "wait", "text": "Requests over time by model"})
	assert.Equal(t, "7d", b.Do(map[string]any{"op": "value", "label": "Period"}))
	assert.Equal(t, "model", b.Do(map[string]any{"op": "value", "label": "Split by"}))
	assert.Equal(t, "Usage", b.Do(map[string]any{"op": "text", "selector": "main h1"}))
}

// The request log's filters, once applied, are kept in the page's address
// with the period and the split: a reload (or a shared link) shows the log
// they filter, where it came back unfiltered.
func TestConsoleRequestLogKeepsItsFiltersInTheAddress(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	require.Equal(t, http.StatusCreated, sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "laptop"}).Status)
	chatLogged(t, sb)
	b.GoTo(ui + "#/usage")
	b.WaitText("1 requests shown")
	filters := map[string]string{"Key": "", "Connection": "", "Model": "local/llama3", "Status": "error",
		"From": "2020-01-01T00:00", "To": "2099-01-01T00:00"}
	for _, label := range []string{"Key", "Connection"} {
		b.Do(map[string]any{"op": "select", "label": label, "value": map[string]string{"Key": "laptop", "Connection": "local"}[label]})
		filters[label] = b.Do(map[string]any{"op": "value", "label": label}).(string)
		require.NotEmpty(t, filters[label], label)
	}
	b.Do(map[string]any{"op": "select", "label": "Status", "value": "error"})
	for _, label := range []string{"Model", "From", "To"} {
		b.Fill(label, filters[label])
	}
	b.Click("button", "Apply filters")
	b.WaitText("0 requests shown")
	b.Do(map[string]any{"op": "select", "label": "Period", "value": "7d"})
	b.Do(map[string]any{"op": "wait", "text": "Requests over time by provider"})

	b.Do(map[string]any{"op": "reload"})
	b.WaitText("requests shown")
	assert.Contains(t, b.Text(), "0 requests shown", "the log read with the filters")
	for label, want := range filters {
		assert.Equal(t, want, b.Do(map[string]any{"op": "value", "label": label}), label)
	}
	assert.Equal(t, "7d", b.Do(map[string]any{"op": "value", "label": "Period"}))
	assert.Empty(t, b.Do(map[string]any{"op": "problems"}))
}

// On a 400-pixel-wide window (a phone) the pages fit: nothing runs off the
// right edge, and the content gets the window's width, not what the side
// navigation leaves of it.
func TestConsoleFitsANarrowWindow(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.Do(map[string]any{"op": "viewport", "width": 400, "height": 800})
	for page, ready := range map[string]string{"providers": "Add a connection", "usage": "Request log"} {
		b.GoTo(ui + "#/" + page)
		b.Do(map[string]any{"op": "wait", "role": "heading", "name": ready})
		assert.LessOrEqual(t, b.Do(map[string]any{"op": "eval", "expr": "document.documentElement.scrollWidth"}), 400.0, "%s runs off the window", page)
		assert.Greater(t, b.Do(map[string]any{"op": "eval", "expr": "document.getElementById('main').getBoundingClientRect().width"}), 360.0, "%s's content width", page)
	}
	b.Shot("narrow-usage")
}

// When the gateway stops answering, the console says so in words, not
// with the browser's "Failed to fetch".
func TestConsoleSaysWhenTheGatewayDoesNotAnswer(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, _ := consoleWithLocal(t, b)
	sb.Stop()
	b.Click("button", "Test local")
	b.WaitText("The gateway did not answer")
	b.Click("link", "Keys")
	b.Do(map[string]any{"op": "wait", "role": "alert"})
	shown := b.Text()
	assert.Contains(t, shown, "The gateway did not answer")
	assert.NotContains(t, shown, "Failed to fetch")
}

// The health page, which refreshes itself, says when it could no longer
// refresh (the gateway stopped), rather than go on showing the connections
// active as they were.
func TestConsoleHealthSaysWhenItCannotRefresh(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/health")
	b.Do(map[string]any{"op": "wait", "within": "tr[data-connection='local']", "text": "active"})
	sb.Stop()
	b.Do(map[string]any{"op": "wait", "role": "alert", "timeout": 15000})
	assert.Contains(t, b.Text(), "Could not refresh")
	assert.Contains(t, b.Text(), "The gateway did not answer")
}

// The server's refusal of a new connection stays in the add form, beside
// the fields to correct, rather than only in a notice that goes away.
func TestConsoleAddFormShowsTheRefusal(t *testing.T) {
	b := nodetest.StartBrowser(t)
	consoleWithLocal(t, b)
	b.Do(map[string]any{"op": "select", "label": "Provider", "value": "openai-compatible"})
	b.Fill("Suffix", "other")
	b.Fill("Name", "other")
	b.Fill("Base URL", "http://127.0.0.1:9/v1")
	b.Fill("Prefix", "local")
	b.Click("button", "Add connection")
	b.Do(map[string]any{"op": "wait", "within": "form[aria-labelledby='add-h'] [role='alert']", "text": "prefix 'local' already names the models"})

	b.Click("button", "Edit local")
	b.Fill("Name", strings.Repeat("n", 201))
	b.Click("button", "Save")
	b.Do(map[string]any{"op": "wait", "within": "form[aria-labelledby='edit-h'] [role='alert']", "text": "'name' must be at most 200 characters"})
}

// An address the console has no page for is titled Not found, with no
// page of the navigation marked as the current one.
func TestConsoleNotFoundPage(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/keys")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Issue a key"})
	b.GoTo(ui + "#/nowhere")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Not found"})
	assert.Equal(t, "Not found · Switchboard", b.Do(map[string]any{"op": "title"}))
	assert.EqualValues(t, 0, b.Do(map[string]any{"op": "count", "selector": "nav a[aria-current]"}))
}

// The request log says why it could not be read (here, a range that ends
// before it starts), rather than keep the rows of the previous filter as
// if they answered the new one.
func TestConsoleRequestLogShowsItsRefusal(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/usage")
	b.Do(map[string]any{"op": "wait", "text": "0 requests shown"})
	b.Fill("From", "2026-11-26T05:00")
	b.Fill("To", "2026-11-26T04:00")
	b.Click("button", "Apply filters")
	b.Do(map[string]any{"op": "wait", "within": "section[aria-labelledby='log-h'] [role='alert']", "text": "until must not be before since"})
	assert.NotContains(t, b.Text(), "0 requests shown", "the count of the previous filter goes")
	assert.Empty(t, b.Do(map[string]any{"op": "problems"}), "no uncaught error")
}

// Paging with the keyboard to the last page keeps the focus on the pager:
// the button that went disabled hands it to the other one.
func TestConsolePagingKeepsFocusOnTheLastPage(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	var many []string
	for i := range 150 {
		many = append(many, fmt.Sprintf("m-%03d", i))
	}
	big := upstreamtest.New(t, upstreamtest.WithModels(many...))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-big", "name": "big",
		"providerSpecificData": map[string]any{"baseUrl": big.URL(), "prefix": "big"}})
	b.Do(map[string]any{"op": "reload"})
	b.Click("button", "Models of big")
	b.WaitText("Page 1 of 2 (150 items)")
	b.Do(map[string]any{"op": "focus", "role": "button", "name": "Next page"})
	b.Do(map[string]any{"op": "press", "key": "Enter"})
	b.WaitText("Page 2 of 2 (150 items)")
	assert.Equal(t, "button:Previous page", b.Do(map[string]any{"op": "focused"}), "the models' pager")

	for i := range 51 {
		resp := sb.Do(t, http.MethodPost, "/v1/chat/completions", map[string]any{
			"model": "local/llama3", "messages": []map[string]any{{"role": "user", "content": fmt.Sprint("hi ", i)}}})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	}
	require.Eventually(t, func() bool {
		r := sb.Admin(t, http.MethodGet, "/api/usage/requests?limit=60", nil)
		rows, _ := r.JSON["requests"].([]any)
		return len(rows) == 51
	}, 30*time.Second, 100*time.Millisecond)
	b.GoTo(ui + "#/usage")
	b.WaitText("50 requests shown")
	b.Do(map[string]any{"op": "focus", "role": "button", "name": "Older requests"})
	b.Do(map[string]any{"op": "press", "key": "Enter"})
	b.WaitText("1 requests shown")
	assert.Equal(t, "button:Newest", b.Do(map[string]any{"op": "focused"}), "the request log's pager")
}

// A connection's own terse-output (caveman) setting, which overrides the
// machine's, is set from its edit form and shown there again.
func TestConsoleSetsAConnectionsCaveman(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, _ := consoleWithLocal(t, b)
	b.Click("button", "Edit local")
	assert.Equal(t, "", b.Do(map[string]any{"op": "value", "label": "Terse answers (caveman)"}), "the machine's setting at first")
	b.Do(map[string]any{"op": "select", "label": "Terse answers (caveman)", "value": "ultra"})
	b.Click("button", "Save")
	b.WaitText("local saved.")
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any)
	data := conns[0].(map[string]any)["providerSpecificData"].(map[string]any)
	assert.Equal(t, map[string]any{"enabled": true, "level": "ultra"}, data["caveman"])

	b.Click("button", "Edit local")
	assert.Equal(t, "ultra", b.Do(map[string]any{"op": "value", "label": "Terse answers (caveman)"}))
	b.Do(map[string]any{"op": "select", "label": "Terse answers (caveman)", "value": "off"})
	b.Click("button", "Save")
	b.WaitText("local saved.")
	conns = sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any)
	data = conns[0].(map[string]any)["providerSpecificData"].(map[string]any)
	assert.Equal(t, false, data["caveman"].(map[string]any)["enabled"])

	b.Click("button", "Edit local")
	b.Do(map[string]any{"op": "select", "label": "Terse answers (caveman)", "value": ""})
	b.Click("button", "Save")
	b.WaitText("local saved.")
	conns = sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any)
	data = conns[0].(map[string]any)["providerSpecificData"].(map[string]any)
	assert.Nil(t, data["caveman"], "back to the machine's setting: no override left")
}

// A connection deleted, or a key revoked, elsewhere (another tab, the
// admin API) while the page showed it goes from the page at the first
// action on it, which says so, where each action answered "no connection
// with id ..." and the row stayed.
func TestConsoleDropsRowsGoneElsewhere(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any)
	id := conns[0].(map[string]any)["id"].(string)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/providers/"+id, nil).Status)
	b.Click("button", "Test local")
	b.WaitText("local was deleted elsewhere.")
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable local", "state": "detached"})

	key := sb.Admin(t, http.MethodPost, "/api/keys", map[string]any{"name": "shared"})
	require.Equal(t, http.StatusCreated, key.Status, "%s", key.Body)
	b.GoTo(ui + "#/keys")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Revoke shared"})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodDelete, "/api/keys/"+key.JSON["id"].(string), nil).Status)
	b.Do(map[string]any{"op": "acceptDialogs"})
	b.Click("button", "Revoke shared")
	b.WaitText("shared was revoked already.")
	b.Do(map[string]any{"op": "wait", "text": "Keys (0)"})
}

// Opening a connection's models takes the focus to them, and cancelling a
// login gives it back to the button that started it, where it stayed
// behind on the Models button or dropped to the page's body.
func TestConsolePanelsTakeAndGiveBackFocus(t *testing.T) {
	b := nodetest.StartBrowser(t)
	consoleWithLocal(t, b)
	b.Click("button", "Models of local")
	b.WaitText("2 models.")
	assert.Equal(t, "h2:Models of local", b.Do(map[string]any{"op": "focused"}))

	b.Click("button", "Log in to qwen")
	b.Click("button", "Cancel")
	assert.Equal(t, "button:Log in to qwen", b.Do(map[string]any{"op": "focused"}))
}

// The models listing offers Disable only for provider models: an alias or
// a combo, which cannot be disabled, is pointed to its own section, where
// its Disable button answered only "Only provider models can be disabled."
func TestConsoleModelsOfferDisableForProviderModelsOnly(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{
		"aliases": map[string]string{"fast": "local/llama3"}}).Status)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{
		"combos": []map[string]any{{"name": "best", "models": []string{"local/llama3"}}}}).Status)
	b.GoTo(ui + "#/models")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Disable local/llama3"})
	assert.EqualValues(t, 0, b.Do(map[string]any{"op": "count", "selector": "button[aria-label='Disable fast'], button[aria-label='Disable best']"}))
	row := b.Do(map[string]any{"op": "text", "selector": "section[aria-labelledby='list-h'] tr:has(td:text-is('fast'))"}).(string)
	assert.Contains(t, row, "see Aliases")
	row = b.Do(map[string]any{"op": "text", "selector": "section[aria-labelledby='list-h'] tr:has(td:text-is('best'))"}).(string)
	assert.Contains(t, row, "see Combos")
}

// Saving an edit writes what the operator changed only: what another tab
// (or the admin API) changed meanwhile on the same connection is kept,
// where the form wrote back every field as it had shown it.
func TestConsoleEditKeepsChangesMadeElsewhere(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, _ := consoleWithLocal(t, b)
	conns := sb.Admin(t, http.MethodGet, "/api/providers", nil).JSON["connections"].([]any)
	id := conns[0].(map[string]any)["id"].(string)
	b.Click("button", "Edit local")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Edit local"})
	elsewhere := sb.Admin(t, http.MethodPatch, "/api/providers/"+id, map[string]any{"name": "renamed",
		"providerSpecificData": map[string]any{"enabledModels": []string{"llama3"}}})
	require.Equal(t, http.StatusOK, elsewhere.Status, "%s", elsewhere.Body)
	b.Fill("Priority", "3")
	b.Click("button", "Save")
	b.WaitText("renamed saved.")
	got := sb.Admin(t, http.MethodGet, "/api/providers/"+id, nil).JSON["connection"].(map[string]any)
	assert.Equal(t, "renamed", got["name"])
	assert.EqualValues(t, 3, got["priority"])
	assert.Equal(t, []any{"llama3"}, got["providerSpecificData"].(map[string]any)["enabledModels"])
}

// Saving the settings writes what was changed on the page only: a setting
// changed meanwhile elsewhere (another tab, the admin API) stays.
func TestConsoleSettingsKeepChangesMadeElsewhere(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/settings")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Save settings"})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"routingStrategy": "round-robin", "stickyLimit": 4}).Status)
	b.Do(map[string]any{"op": "check", "label": "Terse answers (caveman)", "checked": true})
	b.Click("button", "Save settings")
	b.WaitText("Settings saved.")
	s := sb.Admin(t, http.MethodGet, "/api/settings", nil).JSON
	assert.Equal(t, true, s["cavemanEnabled"])
	assert.Equal(t, "round-robin", s["routingStrategy"])
	assert.EqualValues(t, 4, s["stickyLimit"])
}

// The keys and models pages' forms say in the form why the gateway
// refused them (a key's name too long, an alias cycle, a combo of a
// combo), as the connection forms do.
func TestConsoleKeysAndModelsFormsShowTheRefusal(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/keys")
	b.Fill("Key name", strings.Repeat("k", 201))
	b.Click("button", "Issue key")
	b.Do(map[string]any{"op": "wait", "within": "form[aria-labelledby='issue-h'] [role='alert']", "text": "'name' must be at most 200 characters"})

	b.GoTo(ui + "#/models")
	b.Fill("Alias", "loop")
	b.Fill("Model", "loop")
	b.Click("button", "Add alias")
	b.Do(map[string]any{"op": "wait", "within": "section[aria-labelledby='alias-h'] form [role='alert']", "text": "alias cycle: loop -> loop"})
	b.Fill("Combo name", "best")
	b.Fill("Models, in order", "local/llama3")
	b.Click("button", "Add combo")
	b.WaitText("Combo saved.")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Remove combo best"})
	b.Fill("Combo name", "worse")
	b.Fill("Models, in order", "best")
	b.Click("button", "Add combo")
	b.Do(map[string]any{"op": "wait", "within": "section[aria-labelledby='combo-h'] form [role='alert']", "text": "is a combo"})
}

// Paging the dead-lettered webhook events with the keyboard keeps the
// focus on the pager, where each page redrawn dropped it to the body.
func TestConsoleBillingPagingKeepsFocus(t *testing.T) {
	b := nodetest.StartBrowser(t)
	const secret = "whsec_console_paging"
	sb := serveWithBilling(t, secret)
	// Invoice events without their invoice's id are dead-lettered at once.
	for i := range 21 {
		postDeadInvoiceEvent(t, sb, secret, fmt.Sprintf("evt_paging_%02d", i))
	}
	require.Eventually(t, func() bool {
		r := sb.Admin(t, http.MethodGet, "/api/billing/dead-letters", nil)
		return r.Status == http.StatusOK && r.JSON["total"] == float64(21)
	}, 30*time.Second, 50*time.Millisecond, "dead-lettered")
	mint := sb.Admin(t, http.MethodPost, "/api/console/sign-in-codes", map[string]any{})
	require.Equal(t, http.StatusCreated, mint.Status, "%s", mint.Body)
	b.GoTo(sb.BaseURL + "/ui/#/signin?code=" + mint.JSON["code"].(string))
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})
	b.GoTo(sb.BaseURL + "/ui/#/billing")
	b.WaitText("Page 1 of 2 (21 events)")
	b.Do(map[string]any{"op": "focus", "role": "button", "name": "Next page of events"})
	b.Do(map[string]any{"op": "press", "key": "Enter"})
	b.WaitText("Page 2 of 2 (21 events)")
	assert.Equal(t, "button:Previous page of events", b.Do(map[string]any{"op": "focused"}))
}

// The request log's model filter takes a model as the models page lists it
// (local/llama3), where only the upstream's own name (llama3) found its
// requests and the listed id showed none.
func TestConsoleRequestLogFindsAListedModel(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	chatLogged(t, sb)
	b.GoTo(ui + "#/usage")
	b.WaitText("1 requests shown")
	b.Fill("Model", "local/qwen2.5-coder")
	b.Click("button", "Apply filters")
	b.WaitText("0 requests shown")
	b.Fill("Model", "local/llama3")
	b.Click("button", "Apply filters")
	b.WaitText("1 requests shown")
	b.Fill("Model", "llama3")
	b.Click("button", "Apply filters")
	b.WaitText("1 requests shown")
}

// When the gateway refuses the tab's admin token (it was changed, the
// service restarted with another), the sign-in page says why it is back,
// where it showed the empty sign-in form with no word of what happened.
func TestConsoleSaysWhyItAsksToSignInAgain(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.Do(map[string]any{"op": "eval", "expr": "sessionStorage.setItem('switchboard.adminToken', 'a-token-no-longer-valid-0000')"})
	b.GoTo(ui + "#/keys")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Sign in to Switchboard"})
	b.Do(map[string]any{"op": "wait", "role": "alert"})
	assert.Contains(t, b.Text(), "The gateway refused this tab\u2019s admin token")
}

// With API keys required the models page, which cannot call /v1/models
// without one, lists what the gateway serves all the same: a connection's
// enabled models only, not its disabled ones, and the aliases and combos,
// where it listed every model of every connection's upstream and no alias
// or combo.
func TestConsoleModelsListWhatIsServedWithKeysRequired(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	other := upstreamtest.New(t, upstreamtest.WithModels("a", "b"))
	sb.CreateConnection(t, map[string]any{"provider": "openai-compatible-other", "name": "other",
		"providerSpecificData": map[string]any{"baseUrl": other.URL(), "prefix": "other", "enabledModels": []string{"a"}}})
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPost, "/api/models/disabled", map[string]any{
		"providerAlias": "local", "ids": []string{"qwen2.5-coder"}}).Status)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/aliases", map[string]any{
		"aliases": map[string]string{"fast": "local/llama3"}}).Status)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPut, "/api/models/combos", map[string]any{
		"combos": []map[string]any{{"name": "best", "models": []string{"local/llama3"}}}}).Status)
	require.Equal(t, http.StatusOK, sb.Admin(t, http.MethodPatch, "/api/settings", map[string]any{"requireApiKey": true}).Status)
	b.GoTo(ui + "#/models")
	b.WaitText("Listed from each connection")
	listed := b.Do(map[string]any{"op": "text", "selector": "section[aria-labelledby='list-h'] tbody"}).(string)
	assert.Contains(t, listed, "local/llama3")
	assert.Contains(t, listed, "other/a")
	assert.NotContains(t, listed, "other/b", "not enabled")
	assert.NotContains(t, listed, "local/qwen2.5-coder", "disabled")
	assert.Contains(t, listed, "fast")
	assert.Contains(t, listed, "best")
	assert.Contains(t, b.Text(), "All (4)")
}

// On another machine than the default (the machine picker), the models
// listing is that machine's, where it showed the default machine's models
// (from /v1/models, which answers for the default without a key).
func TestConsoleModelsListThePickedMachines(t *testing.T) {
	b := nodetest.StartBrowser(t)
	sb, ui := consoleWithLocal(t, b)
	team := sb.Admin(t, http.MethodPost, "/api/machines", map[string]any{"name": "team-b"})
	require.Equal(t, http.StatusCreated, team.Status, "%s", team.Body)
	teamID := team.JSON["machine"].(map[string]any)["id"].(string)
	up := upstreamtest.New(t, upstreamtest.WithModels("mistral"))
	conn := sb.Admin(t, http.MethodPost, "/api/providers", map[string]any{"provider": "openai-compatible-team", "name": "team",
		"providerSpecificData": map[string]any{"baseUrl": up.URL(), "prefix": "team"}}, "X-Switchboard-Machine", teamID)
	require.Equal(t, http.StatusCreated, conn.Status, "%s", conn.Body)
	b.Do(map[string]any{"op": "reload"})
	b.Do(map[string]any{"op": "select", "label": "Machine", "value": teamID})
	b.Do(map[string]any{"op": "wait", "role": "checkbox", "name": "Enable team"})
	b.GoTo(ui + "#/models")
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Models by kind"})
	listed := b.Do(map[string]any{"op": "text", "selector": "section[aria-labelledby='list-h']"}).(string)
	assert.Contains(t, listed, "team/mistral")
	assert.NotContains(t, listed, "local/llama3", "the default machine's")
}

// Two actions finishing close together: the page ends showing what the
// later one read, never the earlier one's list, slower to come, over it.
func TestConsoleModelsShowTheLatestListAfterActionsOverlap(t *testing.T) {
	b := nodetest.StartBrowser(t)
	_, ui := consoleWithLocal(t, b)
	b.GoTo(ui + "#/models")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Disable local/qwen2.5-coder"})
	// The first action's reload is slow to read the disabled models.
	b.Do(map[string]any{"op": "hold", "url": "**/api/models/disabled", "method": "GET", "count": 1})
	b.Click("button", "Disable local/llama3")
	b.Click("button", "Disable local/qwen2.5-coder")
	b.Do(map[string]any{"op": "wait", "role": "button", "name": "Enable local/qwen2.5-coder"})
	assert.EqualValues(t, 1, b.Do(map[string]any{"op": "release"}), "the first reload was held")
	b.WaitText("local/llama3 disabled.")
	assert.EqualValues(t, 1, b.Do(map[string]any{"op": "count", "selector": "button[aria-label='Enable local/qwen2.5-coder']"}), "both stay shown disabled")
	assert.EqualValues(t, 0, b.Do(map[string]any{"op": "count", "selector": "button[aria-label='Disable local/qwen2.5-coder']"}))
}
