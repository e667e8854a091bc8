package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboardhq/switchboard/internal/oauth"
	"github.com/switchboardhq/switchboard/node/nodetest"
)

// The console's subscription logins in a browser, against a fake
// authorization server (the other console tests are in node/console).

// consoleWithLogins runs the service with OAuth providers whose
// authorization server is a fake answering polls with script, and signs the
// browser in to its console's providers page.
func consoleWithLogins(t *testing.T, b *nodetest.Browser, script ...string) *fakeAuthServer {
	t.Helper()
	f := newFakeAuthServer(t, script...)
	sb := serveWithOAuth(t, f, "")
	mint := sb.Admin(t, http.MethodPost, "/api/console/sign-in-codes", map[string]any{})
	require.Equal(t, http.StatusCreated, mint.Status, "%s", mint.Body)
	b.GoTo(sb.BaseURL + "/ui/#/signin?code=" + mint.JSON["code"].(string))
	b.Do(map[string]any{"op": "wait", "role": "heading", "name": "Providers"})
	return f
}

// A browser login (Codex) whose pasted code the provider refuses says why
// in the login's form, and a login that finishes gives the focus back to
// the button that started it, where the refusal showed only in a notice
// that went away and the finished form took the focus away with it.
func TestConsoleCodeLoginRefusalAndFocus(t *testing.T) {
	b := nodetest.StartBrowser(t)
	consoleWithLogins(t, b, pollOK)

	b.Click("button", "Log in to codex")
	b.Fill("Redirect address or code", "not-the-code")
	b.Click("button", "Finish login")
	b.Do(map[string]any{"op": "wait", "within": "section[aria-labelledby='login-h'] form [role='alert']", "text": "refused the authorization code"})

	authorize := b.Do(map[string]any{"op": "attr", "role": "link", "name": "Open the codex sign-in page", "attr": "href"}).(string)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	consent, err := noFollow.Get(authorize)
	require.NoError(t, err)
	consent.Body.Close()
	b.Fill("Redirect address or code", consent.Header.Get("Location"))
	b.Click("button", "Finish login")
	b.WaitText("Logged in: the connection codex was added.")
	assert.Equal(t, "button:Log in to codex", b.Do(map[string]any{"op": "focused"}))
}

// A device login replaced by another one (the Log in button pressed again)
// stops polling, where its loop went on polling in the background for the
// code's whole life, with no Cancel button left to stop it.
func TestConsoleReplacedDeviceLoginStopsPolling(t *testing.T) {
	b := nodetest.StartBrowser(t)
	f := consoleWithLogins(t, b, oauth.CodePending)
	polls := func(deviceCode string) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, form := range f.tokenForms {
			if form.Get("device_code") == deviceCode {
				n++
			}
		}
		return n
	}
	b.Click("button", "Log in to qwen")
	require.Eventually(t, func() bool { return polls("dc-1") >= 1 }, 10*time.Second, 20*time.Millisecond)
	b.Click("button", "Log in to qwen")
	require.Eventually(t, func() bool { return polls("dc-2") >= 1 }, 10*time.Second, 20*time.Millisecond)
	first := polls("dc-1")
	require.Eventually(t, func() bool { return polls("dc-2") >= 4 }, 15*time.Second, 20*time.Millisecond)
	assert.LessOrEqual(t, polls("dc-1"), first+1, "the replaced login stopped polling (one poll may have been under way)")
}

// A device login's user code says what it is to a screen reader too: it
// is labelled in text, where an aria-label on its paragraph, which
// assistive technology ignores there, left the code on its own.
func TestConsoleDeviceLoginNamesItsUserCode(t *testing.T) {
	b := nodetest.StartBrowser(t)
	consoleWithLogins(t, b, oauth.CodePending)
	b.Click("button", "Log in to qwen")
	b.WaitText(fakeUserCode)
	tree := b.Do(map[string]any{"op": "aria", "selector": "section[aria-labelledby='login-h']"}).(string)
	assert.Regexp(t, `User code.*\n?.*`+fakeUserCode, tree, "what a screen reader is given: the label, then the code")
	assert.EqualValues(t, 0, b.Do(map[string]any{"op": "count", "selector": "section[aria-labelledby='login-h'] p[aria-label]"}), "no aria-label on a paragraph")
	assert.Regexp(t, `region "Log in to qwen"`, tree, "the login's box is a region named by its heading")
	assert.Empty(t, b.Do(map[string]any{"op": "problems"}))
}
