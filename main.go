// Command switchboard is an OpenAI-compatible model gateway. With no
// arguments (or "serve") it runs every role in one process with an embedded
// NATS server; "core", "edge" and "worker" run one role each against an
// external NATS cluster.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/switchboardhq/switchboard/edge"
	"github.com/switchboardhq/switchboard/internal/config"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/internal/telemetry"
	"github.com/switchboardhq/switchboard/node"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `switchboard: an OpenAI-compatible model gateway

usage: switchboard [command] [flags]

commands:
  serve     every role in one process with an embedded NATS server (default)
  core      the core role (routing, credentials, catalogs) on SWITCHBOARD_NATS_URL
  billing   the billing role (Stripe, subscriptions, invoices) on SWITCHBOARD_NATS_URL
  edge      the HTTP edge, reaching core at SWITCHBOARD_CORE_ADDR and billing at SWITCHBOARD_BILLING_ADDR
  worker    the job workers on SWITCHBOARD_NATS_URL
  token     mint a development GraphQL user token: token --user U --email E
  login     sign in to an OAuth provider through a running service: login <provider>
  version   print the version

Run "switchboard <command> -h" for the flags; each mirrors an environment variable.
`

// isHelp reports a flag asking for help: alone, it lists the commands, as
// help does (serve's flags are serve -h's).
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	command := "serve"
	switch {
	case len(args) == 1 && isHelp(args[0]):
		command, args = "help", nil
	case len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-':
		command, args = args[0], args[1:]
	}
	var roles []node.Role
	switch command {
	case "serve":
		roles = node.AllRoles
	case "core":
		roles = []node.Role{node.RoleCore}
	case "billing":
		roles = []node.Role{node.RoleBilling}
	case "token":
		return mintToken(args, getenv, stdout, stderr)
	case "login":
		return login(args, getenv, os.Stdin, stdout, stderr)
	case "edge":
		roles = []node.Role{node.RoleEdge}
	case "worker":
		roles = []node.Role{node.RoleWorker}
	case "version":
		fmt.Fprintln(stdout, "switchboard", version)
		return 0
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "switchboard: unknown command %q\n\n%s", command, usage)
		return 2
	}
	cfg, err := config.Load(command, args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	// The variables without a flag are checked with the others: every
	// invalid value is in the one list.
	if err := errors.Join(err, tuneMemory(getenv), telemetry.CheckEnv(getenv), checkDebugAddr(getenv(debugAddrEnv))); err != nil {
		fmt.Fprintf(stderr, "switchboard: invalid configuration:\n%v\n", err)
		return 2
	}
	log := cfg.Logger(stderr)
	stopDiagnostics, err := startDiagnostics(getenv, stdout, log)
	defer stopDiagnostics()
	if err != nil {
		log.Error("diagnostics", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := node.Start(ctx, cfg, log, roles...)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	// Once starting has settled (the embedded NATS server and the roles'
	// background loops finish theirs within a few hundred milliseconds of
	// ready), the code it ran once need not stay resident.
	settled := time.AfterFunc(releaseAfter, func() {
		if err := releaseExecutablePages(); err != nil {
			log.Debug("executable pages kept", "err", err)
		}
	})
	defer settled.Stop()
	if addr := n.HTTPAddr(); addr != "" {
		fmt.Fprintf(stdout, "switchboard %s: OpenAI-compatible API at http://%s/v1\n", version, addr)
	}
	if addr := n.GRPCAddr(); addr != "" {
		fmt.Fprintf(stdout, "switchboard %s: gRPC (core) at %s\n", version, addr)
	}
	if n.AdminTokenPath != "" {
		fmt.Fprintf(stdout, "switchboard %s: admin token in %s\n", version, n.AdminTokenPath)
	}
	if addr := n.HTTPAddr(); addr != "" {
		go printConsoleLink(ctx, "http://"+addr, consoleAdminToken(cfg), stdout)
	}
	if err := n.Run(ctx); err != nil {
		log.Error("stopped with an error", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// mintToken prints a development user token signed with the configured
// SWITCHBOARD_JWT_SECRET, else the secret `serve` generated in the data
// directory.
func mintToken(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.String("user", "", "user id (the token's sub)")
	email := fs.String("email", "", "user email")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime of the token")
	dataDir := fs.String("data-dir", or(getenv("SWITCHBOARD_DATA_DIR"), "./data"), "data directory holding the generated secret [$SWITCHBOARD_DATA_DIR]")
	secret := fs.String("jwt-secret", getenv("SWITCHBOARD_JWT_SECRET"), "HS256 secret [$SWITCHBOARD_JWT_SECRET]")
	// One default in the help: the variable's value, else the built-in one.
	issuerHelp := "iss claim [$SWITCHBOARD_JWT_ISSUER]"
	if getenv("SWITCHBOARD_JWT_ISSUER") == "" {
		issuerHelp += ` (default "switchboard")`
	}
	issuer := fs.String("issuer", getenv("SWITCHBOARD_JWT_ISSUER"), issuerHelp)
	audience := fs.String("audience", getenv("SWITCHBOARD_JWT_AUDIENCE"), "aud claim [$SWITCHBOARD_JWT_AUDIENCE]")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *user == "" || *email == "" {
		fmt.Fprintln(stderr, "switchboard token: --user and --email are required")
		return 2
	}
	if *secret != "" && len(*secret) < config.MinJWTSecret {
		// serve refuses it at start: no gateway would check these tokens.
		fmt.Fprintf(stderr, "switchboard token: --jwt-secret (SWITCHBOARD_JWT_SECRET) must be at least %d characters (an HS256 key is at least 256 bits)\n", config.MinJWTSecret)
		return 2
	}
	if *secret == "" {
		b, err := secrets.Load(filepath.Join(*dataDir, node.JWTSecretFile))
		if err != nil {
			fmt.Fprintf(stderr, "switchboard token: SWITCHBOARD_JWT_SECRET is not set and %s has no generated secret (run `switchboard serve` once)\n", *dataDir)
			return 1
		}
		*secret = string(b)
	}
	tok, err := edge.MintDevTokenFor(*secret, *issuer, *audience, *user, *email, *ttl)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard token: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// consoleAdminToken is the admin token the console link is minted with: the
// configured one, else the one generated in the data directory (empty when
// neither is known, as on an edge of its own).
func consoleAdminToken(cfg config.Config) string {
	if cfg.AdminToken != "" {
		return cfg.AdminToken
	}
	b, err := secrets.Load(filepath.Join(cfg.DataDir, node.AdminTokenFile))
	if err != nil {
		return ""
	}
	return string(b)
}

// printConsoleLink prints the console's address and, once the service is
// ready, a one-time sign-in link: a short-lived code the console exchanges
// for the admin token, never the token itself.
func printConsoleLink(ctx context.Context, base, token string, stdout io.Writer) {
	console := base + "/ui/"
	if token == "" {
		fmt.Fprintf(stdout, "switchboard %s: console at %s (sign in with the admin token)\n", version, console)
		return
	}
	code, err := mintSignInCode(ctx, base, token)
	if err != nil {
		fmt.Fprintf(stdout, "switchboard %s: console at %s (sign in with the admin token; no sign-in link: %v)\n", version, console, err)
		return
	}
	fmt.Fprintf(stdout, "switchboard %s: console at %s\n", version, console)
	fmt.Fprintf(stdout, "switchboard %s: sign in once, within 10 minutes, at %s#/signin?code=%s\n", version, console, code)
}

// mintSignInCode asks the running service for a sign-in code, waiting for
// it to be ready (30 seconds at most).
func mintSignInCode(ctx context.Context, base, token string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/console/sign-in-codes", strings.NewReader("{}"))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err == nil {
			var out struct {
				Code string `json:"code"`
			}
			derr := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&out)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusCreated && derr == nil && out.Code != "" {
				return out.Code, nil
			}
			if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusBadGateway {
				return "", fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		select {
		case <-ctx.Done():
			return "", errors.New("the service did not answer")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
