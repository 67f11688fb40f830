package coordsidecar

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fenceLine is a CommonMark code fence: up to three spaces, then three or more
// backticks or tildes, then an optional info string (the language).
var fenceLine = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*(.*)$")

// fenceProblems reads one Markdown document and says where its code fences do
// not pair up: a fence left open at the end, and a fence that carries a
// language while a block is open. The latter is legal Markdown (it is then a
// line of code), but in these docs it only ever means that the opening fence
// of the block before it was lost, which turns the prose that follows into
// code and the next block into prose.
func fenceProblems(doc []byte) []string {
	var problems []string
	open, openLine, openFence := false, 0, ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		m := fenceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fence, info := m[1], strings.TrimSpace(m[2])
		if !open {
			if fence[0] == '`' && strings.Contains(info, "`") {
				continue // an inline code span at the start of a line, not a fence
			}
			open, openLine, openFence = true, n, fence
			continue
		}
		closes := fence[0] == openFence[0] && len(fence) >= len(openFence)
		switch {
		case closes && info == "":
			open = false
		case closes:
			problems = append(problems, "line "+strconv.Itoa(n)+": fence "+fence+info+
				" inside the block opened at line "+strconv.Itoa(openLine)+" (an opening fence lost before it?)")
		}
	}
	if open {
		problems = append(problems, "the block opened at line "+strconv.Itoa(openLine)+" is never closed")
	}
	return problems
}

// Every Markdown file of the repository (those git tracks) has its code fences
// balanced: a lost fence turns prose into code and code into prose, as
// docs/EXAMPLES.md's "A partition worker in bash" once was.
func TestMarkdownFencesAreBalanced(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z", "--", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) == 0 || files[0] == "" {
		t.Fatal("git ls-files lists no Markdown file")
	}
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range fenceProblems(doc) {
			t.Errorf("%s: %s", f, p)
		}
	}
	t.Logf("%d Markdown files checked", len(files))
}

// The check itself finds a lost opening fence and an unclosed one, and passes
// what is right (fences of either kind, longer closers, indented fences).
func TestFenceProblems(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      int
	}{
		{"balanced", "text\n```go\ncode\n```\n\n~~~\nx\n~~~~\n  ```sh\ny\n  ```\n", 0},
		{"lost opener", "```go\na\n```\nprose\nb\n```\n\n## next\n\n```bash\nc\n```\n", 1},
		{"unclosed", "```go\na\n", 1},
		{"other fence inside", "~~~\n```go\n~~~\n", 0},
		{"inline span", "``` `x` ``` is code\n", 0},
	} {
		if got := fenceProblems([]byte(c.doc)); len(got) != c.want {
			t.Errorf("%s: %d problems %q, want %d", c.name, len(got), got, c.want)
		}
	}
}
