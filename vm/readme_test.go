package vm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestProjectReadmeExample holds the README's Example section to the
// package's Example function: its Go block is that function's body and the
// block after it is the function's Output, which go test checks. So the
// README's code compiles and prints what it says.
func TestProjectReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Example\n")
	if !ok {
		t.Fatal("README has no Example section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := fencedBlocks(section)
	if len(blocks) < 2 || blocks[0].lang != "go" || blocks[1].lang != "" {
		t.Fatalf("README's Example section wants a go block and the output after it, has %d blocks", len(blocks))
	}

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var body string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "Example" && fd.Recv == nil {
			body = string(src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset])
		}
	}
	code, output, ok := strings.Cut(body, "\t// Output:\n")
	if !ok {
		t.Fatal("Example has no Output comment")
	}
	var lines []string
	for _, s := range strings.Split(strings.Trim(code, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(s, "\t"))
	}
	if got, want := blocks[0].text, strings.Join(lines, "\n"); got != want {
		t.Errorf("README's example is not Example's body\n--- README ---\n%s\n--- Example ---\n%s", got, want)
	}
	lines = lines[:0]
	for _, s := range strings.Split(strings.TrimRight(output, "\n\t"), "\n") {
		lines = append(lines, strings.TrimPrefix(strings.TrimSpace(s), "// "))
	}
	if got, want := blocks[1].text, strings.Join(lines, "\n"); got != want {
		t.Errorf("README's output is not Example's\n--- README ---\n%s\n--- Example ---\n%s", got, want)
	}
}

type fenced struct{ lang, text string }

// fencedBlocks returns the ``` blocks of markdown s, in order.
func fencedBlocks(s string) []fenced {
	var out []fenced
	for {
		_, rest, ok := strings.Cut(s, "```")
		if !ok {
			return out
		}
		lang, rest, _ := strings.Cut(rest, "\n")
		text, after, ok := strings.Cut(rest, "```")
		if !ok {
			return out
		}
		out = append(out, fenced{lang, strings.TrimSuffix(text, "\n")})
		s = after
	}
}
