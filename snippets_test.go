package sluice_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestSnippetsCompile keeps every Go snippet of README.md and of the
// package documentation compiling: each must appear, line for line
// (leading and trailing space aside), in a _test.go file of the module,
// where the compiler checks it (an Example or a function an Example
// calls). Every sluice configuration in README.md must also parse.
func TestSnippetsCompile(t *testing.T) {
	var tests []string // the trimmed, non-blank lines of each _test.go file, joined by "\n"
	var snippets []snippet
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (name == "bench" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir // bench is a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			tests = append(tests, "\n"+strings.Join(trimmed(string(b)), "\n")+"\n")
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc != nil && f.Name.Name != "main" {
			snippets = append(snippets, docSnippets(path, f.Doc.Text())...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	goBlocks, yamlBlocks := fenced(string(readme), "go"), fenced(string(readme), "yaml")
	for i, b := range goBlocks {
		snippets = append(snippets, snippet{where: "README.md, Go block " + string(rune('1'+i)), text: b})
	}
	if len(goBlocks) == 0 {
		t.Error("README.md has no Go block: the test is reading the wrong file")
	}
	for _, s := range snippets {
		want := "\n" + strings.Join(trimmed(s.text), "\n") + "\n"
		found := false
		for _, f := range tests {
			if strings.Contains(f, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s is compiled by no test: copy it into an Example (or a function one calls):\n%s", s.where, s.text)
		}
	}
	for i, b := range yamlBlocks {
		if !strings.Contains(b, "routes:") {
			continue
		}
		if _, err := config.Parse("README.md", []byte(b)); err != nil {
			t.Errorf("README.md, YAML block %d does not parse: %v", i+1, err)
		}
	}
}

type snippet struct{ where, text string }

// docSnippets returns the Go code blocks of a package comment: runs of
// indented lines holding Go (an assignment); diagrams and command lines
// are not Go.
func docSnippets(path, doc string) []snippet {
	var out []snippet
	var block []string
	flush := func() {
		text := strings.Join(block, "\n")
		if strings.Contains(text, ":=") {
			out = append(out, snippet{where: path + "'s package comment", text: text})
		}
		block = nil
	}
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "\t"):
			block = append(block, line)
		case strings.TrimSpace(line) == "" && block != nil:
			block = append(block, line)
		default:
			if block != nil {
				flush()
			}
		}
	}
	if block != nil {
		flush()
	}
	return out
}

// fenced returns the bodies of the Markdown code blocks fenced as lang.
func fenced(md, lang string) []string {
	var out []string
	var block []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in, block = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, strings.Join(block, "\n"))
		case in:
			block = append(block, line)
		}
	}
	return out
}

// trimmed returns the lines of s without their leading and trailing space,
// blank lines left out.
func trimmed(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if l := strings.TrimSpace(line); l != "" {
			out = append(out, l)
		}
	}
	return out
}
