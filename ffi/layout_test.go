//go:build cgo

package ffi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepvm/stepvm/ffi/internal/ctest"
)

// Every field of FTN12 2.7 sits where the specification's declarations put
// it on this platform (checked in C, against the header).
func TestLayout(t *testing.T) {
	if failed := ctest.Layout(); failed != "" {
		t.Fatalf("layout checks failed:\n%s", failed)
	}
}

// The header is ISO C11 as it stands, and C++ too, with every warning on.
func TestHeaderCompiles(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skip("no C compiler:", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "t.c")
	if err := os.WriteFile(src, []byte("#include \"futoin/binaryapi.h\"\nstatic FutoInArgs a;\nint main(void) { futoin_reset_binval(&a.arg0); return a.args[0].type != 0; }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-x", "c", "-std=c11", "-pedantic-errors", "-Wall", "-Wextra", "-Werror"},
		{"-x", "c++", "-std=c++11", "-Wall", "-Wextra", "-Werror"},
	} {
		cmd := exec.Command(cc, append(args, "-Iinclude", "-fsyntax-only", src)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			if args[1] == "c++" && strings.Contains(string(out), "not found") {
				t.Logf("no C++ compiler: the header was not checked as C++ (%s)", strings.TrimSpace(string(out)))
				continue
			}
			t.Errorf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
		}
	}
}
