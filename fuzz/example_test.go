package fuzz_test

import (
	"fmt"
	"strings"

	"github.com/stepvm/stepvm/fuzz"
	"github.com/stepvm/stepvm/fuzz/model"
	"github.com/stepvm/stepvm/fuzz/prog"
)

func ExampleRun() {
	p, err := prog.Parse(`
root main {
  step {
    timeout 10ms
    stack 16
    step {
      wait
    } catch {
      print "inner: {code}"
    }
  }
}`)
	if err != nil {
		panic(err)
	}
	vmTrace, err := fuzz.Run(p, prog.DefaultLimits, fuzz.Options{})
	if err != nil {
		panic(err) // the VM broke an invariant
	}
	modelTrace, _ := model.Run(p, prog.DefaultLimits)
	fmt.Println(strings.Join(vmTrace.Lines, "\n"))
	fmt.Printf("agree: %v\n", fuzz.Divergence(vmTrace, modelTrace) == "")
	// Output:
	// main: enter s1
	// main: enter s2
	// main: catch s2 Timeout
	// main: print inner: Timeout
	// main: free s1 16
	// main: done error Timeout
	// agree: true
}
