package model_test

import (
	"fmt"
	"strings"

	"github.com/stepvm/stepvm/fuzz/model"
	"github.com/stepvm/stepvm/fuzz/prog"
)

func ExampleRun() {
	p, err := prog.Parse(`
root main {
  parallel {
    step a {
      onCancel {
        print "a canceled"
      }
      wait
    }
    step b {
      error Broken "b failed"
    }
  } catch {
    success "recovered"
  }
  step {
    print "{arg0} from {info}"
  }
}`)
	if err != nil {
		panic(err)
	}
	t, err := model.Run(p, prog.DefaultLimits)
	fmt.Println(strings.Join(t.Lines, "\n"), err)
	// Output:
	// main: enter a
	// main: enter b
	// main: cancel a
	// main: print a canceled
	// main: catch s1 Broken
	// main: enter s4 "recovered"
	// main: print recovered from b failed
	// main: done ok <nil>
}
