package node_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// internal/ is the spine every role uses and knows no role: none of its
// packages (tests included) depends on a role or on the composition root.
func TestInternalImportsNoRole(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	const module = "github.com/switchboardhq/switchboard"
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./internal/...")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var wrong []string
	for _, pkg := range strings.Fields(string(out)) {
		for _, role := range []string{"core", "edge", "billing", "workers", "node"} {
			prefix := module + "/" + role
			if pkg == prefix || strings.HasPrefix(pkg, prefix+"/") {
				wrong = append(wrong, pkg)
			}
		}
	}
	require.Empty(t, wrong, "internal/ depends on role packages")
}

// The audio routes share the gateway's attempts with chat (dispatch,
// credential), not chat itself: core's audio package, tests aside, depends
// on neither chat nor its translators.
func TestAudioImportsNoChat(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	const module = "github.com/switchboardhq/switchboard"
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./core/internal/audio")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var wrong []string
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == module+"/core/internal/chat" || pkg == module+"/core/internal/translate" {
			wrong = append(wrong, pkg)
		}
	}
	require.Empty(t, wrong, "core/internal/audio depends on chat")
}
