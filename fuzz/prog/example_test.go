package prog_test

import (
	"fmt"

	"github.com/stepvm/stepvm/fuzz/prog"
)

func ExampleParse() {
	p, err := prog.Parse(`
root main { step { print "hi" ; error Oops "bad" } catch { success 1 } }`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(p)
	_, err = prog.Parse("root main {\n  step {\n    success\n    print \"late\"\n  }\n}")
	fmt.Println(err)
	// Output:
	// root main {
	//   step {
	//     print "hi"
	//     error Oops "bad"
	//   } catch {
	//     success 1
	//   }
	// }
	// 4:5: statement after success: it ends the block
}

func ExampleGenerate() {
	// no mutex, no model, one root, default name, no cancel, a step (1),
	// unnamed, in its body a print (8) of template 2 ("b"), then the ends
	// of the lists (the input runs out: 0).
	fmt.Print(prog.Generate([]byte{0, 0, 0, 0, 0, 1, 0, 8, 2}))
	// Output:
	// root r0 {
	//   step {
	//     print "b"
	//   }
	// }
}
