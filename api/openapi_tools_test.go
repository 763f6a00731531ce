package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronoq/chronoq/api"
	"github.com/chronoq/chronoq/demo"
)

// openAPITools is the npm package of the tools a generated client meets
// (Redocly's CLI, openapi-typescript), pinned by its lock file; make
// openapi-tools-deps runs npm ci there.
const openAPITools = "testdata/openapi-tools"

// TestOpenAPITools runs the served document through Redocly's linter with
// its recommended rules, which must report no error, and through
// openapi-typescript with its default settings, which must make no field
// required that the document does not list as required (by default it
// makes a field with a default required, so a client generated with it
// would have to send every defaulted field). Both documents are checked:
// serve's, and chronoq demo's with its own operations.
//
// Without the tools (make openapi-tools-deps) the test skips, unless
// CHRONOQ_REQUIRE_OPENAPI_TOOLS=1 (as in CI), when it fails.
func TestOpenAPITools(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(openAPITools, "node_modules", ".bin")
	for _, tool := range []string{"node", filepath.Join(bin, "redocly"), filepath.Join(bin, "openapi-typescript")} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " not found: run make openapi-tools-deps (scripts/ensure-deps.sh --openapi-tools, then npm ci in " + openAPITools + ")"
			if os.Getenv("CHRONOQ_REQUIRE_OPENAPI_TOOLS") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}

	b := setupCron(t)
	r := b.do(t, http.MethodGet, "/v1/openapi.json", nil)
	require.Equal(t, http.StatusOK, r.status)
	pool, err := demo.New(demo.Config{Client: b.client})
	require.NoError(t, err)
	demoSrv, err := api.New(api.Config{Store: b.client, Cron: &memCron{client: b.client}, Token: "t",
		Routes: pool.Routes(), RoutesOpenAPI: demo.OpenAPI()})
	require.NoError(t, err)

	for name, doc := range map[string][]byte{"serve": r.body, "demo": demoSrv.OpenAPI()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "openapi.json")
			require.NoError(t, os.WriteFile(file, doc, 0o600))
			abs, err := filepath.Abs(bin)
			require.NoError(t, err)
			t.Run("redocly", func(t *testing.T) {
				problems := redoclyErrors(t, filepath.Join(abs, "redocly"), file)
				require.Empty(t, problems, "Redocly's recommended rules report errors on the served document")
			})
			t.Run("openapi-typescript", func(t *testing.T) {
				out := filepath.Join(dir, "schema.d.ts")
				runTool(t, false, filepath.Join(abs, "openapi-typescript"), file, "--output", out)
				ts, err := os.ReadFile(out)
				require.NoError(t, err)
				require.Empty(t, madeRequired(t, doc, string(ts)),
					"openapi-typescript with default settings makes these fields required, which the document does not require")
			})
		})
	}
}

// runTool runs a tool and answers its standard output. It fails the test
// when the tool cannot run, or exits other than 0 unless anyExit (Redocly
// exits 1 when it reports an error, which the caller reads from the
// output).
func runTool(t *testing.T, anyExit bool, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// Off the network: no telemetry, no update check.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && (!anyExit || !errors.As(err, &ee)) {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// redoclyErrors lints file with Redocly's recommended rules and answers
// the errors (warnings are Redocly's advice, not the contract's).
func redoclyErrors(t *testing.T, redocly, file string) []string {
	t.Helper()
	out := runTool(t, true, redocly, "lint", "--extends=recommended", "--format=json", file)
	var res struct {
		Totals struct {
			Errors int `json:"errors"`
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "redocly lint --format=json answered:\n%s", out)
	var errs []string
	for _, p := range res.Problems {
		if p.Severity != "error" {
			continue
		}
		at := ""
		if len(p.Location) > 0 {
			at = p.Location[0].Pointer
		}
		errs = append(errs, p.RuleID+" at "+at+": "+p.Message)
	}
	require.Len(t, errs, res.Totals.Errors, "every error counted is listed")
	return errs
}

var (
	tsSchema   = regexp.MustCompile(`^ {8}("?[A-Za-z0-9_.-]+"?): \{$`)
	tsProperty = regexp.MustCompile(`^ {12}("?[A-Za-z0-9_.-]+"?)(\??): `)
)

// madeRequired answers the fields of the document's component schemas
// that the generated TypeScript requires although the document does not,
// as "Schema.field". It fails the test when a schema or a field of the
// document is missing from the TypeScript, so that a change of
// openapi-typescript's output cannot make it check nothing.
func madeRequired(t *testing.T, doc []byte, ts string) []string {
	t.Helper()
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(doc, &d))

	// The TypeScript's components.schemas: schema -> field -> optional.
	gen := map[string]map[string]bool{}
	var in bool
	var cur map[string]bool
	sc := bufio.NewScanner(strings.NewReader(ts))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "    schemas: {":
			in = true
		case in && line == "    };":
			in = false
		case !in:
		case tsSchema.MatchString(line):
			cur = map[string]bool{}
			gen[strings.Trim(tsSchema.FindStringSubmatch(line)[1], `"`)] = cur
		case line == "        };":
			cur = nil
		case cur != nil && tsProperty.MatchString(line):
			m := tsProperty.FindStringSubmatch(line)
			cur[strings.Trim(m[1], `"`)] = m[2] == "?"
		}
	}
	require.NoError(t, sc.Err())

	var bad []string
	checked := 0
	for name, s := range d.Components.Schemas {
		if len(s.Properties) == 0 {
			continue
		}
		fields, ok := gen[name]
		require.True(t, ok, "schema %s is not in openapi-typescript's output", name)
		for field := range s.Properties {
			optional, ok := fields[field]
			require.True(t, ok, "%s.%s is not in openapi-typescript's output", name, field)
			checked++
			if !optional && !slices.Contains(s.Required, field) {
				bad = append(bad, name+"."+field)
			}
		}
	}
	require.NotZero(t, checked)
	slices.Sort(bad)
	return bad
}
