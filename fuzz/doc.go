// Package fuzz holds the VM to a reference model: it runs step programs
// (package fuzz/prog) on the VM and compares their traces with those of
// the reference interpreter (package fuzz/model).
//
// Run executes a program on a vm.Loop driven by a manual clock and returns
// its trace; it also checks what the VM must guarantee whatever the
// program: no panic escapes it, every root completes exactly once, the
// loop is idle at the end, stack allocations are zeroed and kept intact,
// and no arena memory is in use once every root is released. Stack memory
// is StackRaw's, whose destroy callback traces its end, or vm.Stack's, of
// a type with or without Go pointers: that has no callback, so the harness
// brackets it with two StackRaw allocations of its step and checks, as
// their callbacks run, that it is intact until the step ends and that the
// arena gets its bytes back then (see stack.go); the trace shows its end
// as StackRaw's does, where the model says the step ends.
//
// # Fuzzing
//
// The fuzz targets are
//
//   - FuzzVMvsModel: the input is a choice stream (prog.Generate) that
//     always makes a well-formed program; the VM and the model must produce
//     the same trace and the VM must keep the guarantees above.
//   - FuzzParse: any text; the parser must not panic, and a program that
//     parses must print to text that parses back to the same program.
//   - FuzzAPI: the input drives package vm's public API directly, misuse,
//     panics and calls through stale handles and Resumers included, with
//     no model: the VM must keep its own guarantees (see api_test.go).
//
// Run them, one at a time, with
//
//	go test -run '^$' -fuzz '^FuzzVMvsModel$' -fuzztime 10m -parallel 1 ./fuzz
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 10m -parallel 1 ./fuzz
//	go test -run '^$' -fuzz '^FuzzAPI$' -fuzztime 10m -parallel 1 ./fuzz
//
// (-fuzztime 300000x bounds a run by executions instead.)
//
// The seed corpus in testdata/fuzz holds the specification's examples
// (Examples) and the programs of testdata/programs, encoded for each target
// (go test ./fuzz -run TestSeedCorpus -update rewrites it, after a new
// program or a change of the generator's choices); go test ./fuzz replays
// it together with every crash the fuzzer ever wrote there, which a change
// of the generator turns into other programs, all of which must pass too.
// testdata/bugs holds the programs that made the fuzzer fail, run by
// TestBugRepros.
//
// To reproduce a finding, run the file go test -fuzz wrote with the stepvm
// command:
//
//	go run ./cmd/stepvm run --diff --program fuzz/testdata/fuzz/FuzzVMvsModel/<hash>
package fuzz
