package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	coordsidecar "github.com/coord-sidecar/coord-sidecar"
	"github.com/coord-sidecar/coord-sidecar/api/tokens"
)

// docs/PROBLEMS.md lists every problem type the sidecar can answer, with its
// status: every name the code can put in a problem's type has a row giving the
// status the code answers it with, every row is a name the code can answer, and
// every name openapi.yaml's Problem schema lists has a row. The code's names are
// read from the source of this package and of every folder under it (each
// recipe's HTTP side): the names given to NewProblem and ProblemIs (a
// recipe descriptor's rules) and in problem literals, and the sharedProblems
// table.
func TestEveryProblemTypeIsDocumented(t *testing.T) {
	code := codeProblems(t)
	docs := documentedProblems(t)
	for _, name := range slices.Sorted(maps.Keys(code)) {
		statuses, ok := docs[name]
		if !ok {
			t.Errorf("the code answers problem %q (status %v), which docs/PROBLEMS.md does not list", name, code[name])
			continue
		}
		for _, st := range code[name] {
			if st != 0 && !slices.Contains(statuses, st) {
				t.Errorf("docs/PROBLEMS.md gives %q the status %v; the code answers it with %d", name, statuses, st)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/PROBLEMS.md lists problem %q, which no code answers", name)
		}
	}
	for _, name := range openAPIProblems(t) {
		if _, ok := docs[name]; !ok {
			t.Errorf("openapi.yaml's Problem schema lists %q, which docs/PROBLEMS.md does not", name)
		}
	}
	if len(code) < 40 {
		t.Fatalf("found %d problem types in the code: the test does not read it right", len(code))
	}
}

// httpStatuses are the net/http status constants the package gives problems.
var httpStatuses = map[string]int{}

func init() {
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			httpStatuses[statusConstName(text)] = code
		}
	}
}

// statusConstName is net/http's constant name for a status text, which is the
// text without spaces, hyphens and apostrophes ("Request Entity Too Large":
// StatusRequestEntityTooLarge), with three exceptions of net/http's own.
func statusConstName(text string) string {
	switch text {
	case "I'm a teapot":
		return "StatusTeapot"
	case "Request URI Too Long":
		return "StatusRequestURITooLong"
	case "HTTP Version Not Supported":
		return "StatusHTTPVersionNotSupported"
	}
	return "Status" + strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)
}

// codeProblems answers every problem name the package's code can answer, each
// with its statuses (0: not known from the source).
func codeProblems(t *testing.T) map[string][]int {
	t.Helper()
	names := map[string][]int{}
	add := func(name string, status int) {
		if !slices.Contains(names[name], status) {
			names[name] = append(names[name], status)
		}
	}
	for _, k := range sharedProblems {
		add(k.name, k.status)
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	recipes, err := filepath.Glob("*/*.go") // each recipe's HTTP side, api/locks, ...
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, recipes...)
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || strings.HasSuffix(file, ".gen.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			var fnName string // the function whose body is read, "" in a declaration
			if fn, ok := decl.(*ast.FuncDecl); ok {
				fnName = fn.Name.Name
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				nameExpr, statusExpr := problemExprs(n)
				if nameExpr == nil {
					return true
				}
				status := statusOf(statusExpr)
				if name, ok := stringLit(nameExpr); ok {
					add(name, status)
					return true
				}
				switch {
				case fnName == "NewProblem", fnName == "ProblemIs", fnName == "ProblemWith": // their callers name the problem
				case fnName == "problemFor": // the sharedProblems table, read above
				case isShareName(nameExpr):
					prefix, _ := stringLit(nameExpr.(*ast.BinaryExpr).X)
					for _, share := range shareNames[tokens.Streams:] { // leases are refused by errTooManyLeases
						add(prefix+share, status)
					}
				default:
					t.Errorf("%s: a problem name the test cannot read; teach TestEveryProblemTypeIsDocumented", fset.Position(nameExpr.Pos()))
				}
				return true
			})
		}
	}
	return names
}

// problemExprs answers the name and status of a NewProblem, ProblemIs or
// ProblemWith call or a problem literal, or nil.
func problemExprs(n ast.Node) (name, status ast.Expr) {
	switch n := n.(type) {
	case *ast.CallExpr:
		if isAPIName(n.Fun, "NewProblem") && len(n.Args) >= 2 {
			return n.Args[1], n.Args[0]
		}
		if isAPIName(n.Fun, "ProblemIs") && len(n.Args) == 3 {
			return n.Args[2], n.Args[1]
		}
		if isAPIName(n.Fun, "ProblemWith") && len(n.Args) == 4 {
			return n.Args[1], n.Args[0]
		}
	case *ast.CompositeLit:
		if isAPIName(n.Type, "Problem") {
			for _, el := range n.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					switch kv.Key.(*ast.Ident).Name {
					case "Name":
						name = kv.Value
					case "Status":
						status = kv.Value
					}
				}
			}
		}
	}
	return name, status
}

// statusOf reads http.StatusX or a number; 0 for anything else.
func statusOf(e ast.Expr) int {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "http" {
			return httpStatuses[e.Sel.Name]
		}
	case *ast.Ident:
		if e.Name == "StatusClientClosedRequest" {
			return StatusClientClosedRequest
		}
	case *ast.BasicLit:
		n, _ := strconv.Atoi(e.Value)
		return n
	}
	return 0
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// isShareName reports whether e is "prefix" + shareNames[...].
func isShareName(e ast.Expr) bool {
	b, ok := e.(*ast.BinaryExpr)
	if !ok || b.Op != token.ADD {
		return false
	}
	if _, ok := stringLit(b.X); !ok {
		return false
	}
	idx, ok := b.Y.(*ast.IndexExpr)
	if !ok {
		return false
	}
	id, ok := idx.X.(*ast.Ident)
	return ok && id.Name == "shareNames"
}

var problemRowRE = regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| ([0-9, ]+) \\|")

// documentedProblems reads the table of docs/PROBLEMS.md: name → statuses.
func documentedProblems(t *testing.T) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "PROBLEMS.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]int{}
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := problemRowRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/PROBLEMS.md:%d: a row that is not | `name` | status | ...: %s", i+1, line)
			continue
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("docs/PROBLEMS.md:%d: %q has a second row", i+1, m[1])
		}
		var statuses []int
		for _, f := range strings.Split(m[2], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Errorf("docs/PROBLEMS.md:%d: status %q", i+1, f)
			}
			statuses = append(statuses, n)
		}
		rows[m[1]] = statuses
	}
	return rows
}

// openAPIProblems reads the names openapi.yaml's Problem schema lists ("Short
// names used: `a`, `b` (...), ...").
func openAPIProblems(t *testing.T) []string {
	t.Helper()
	spec := string(coordsidecar.OpenAPI)
	start := strings.Index(spec, "Short names used:")
	if start < 0 {
		t.Fatal("openapi.yaml's Problem schema no longer says \"Short names used:\"")
	}
	end := strings.Index(spec[start:], "required:")
	list := regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(spec[start:start+end], "") // the extension members
	var names []string
	for _, m := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(list, -1) {
		names = append(names, m[1])
	}
	if len(names) < 30 {
		t.Fatalf("read %d names from openapi.yaml's Problem schema: the test does not read it right", len(names))
	}
	return names
}

// isAPIName tells whether e names api's own name: name inside package api,
// api.name in a recipe's HTTP side.
func isAPIName(e ast.Expr, name string) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == name
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "api" && e.Sel.Name == name
	}
	return false
}
