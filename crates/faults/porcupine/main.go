// Command porcupine checks register histories with Porcupine, the
// linearizability checker the Rust checker (crates/faults/src/check/
// register.rs) follows, so that a test can compare their verdicts on the
// same files. Each argument is a history: Jepsen records, one JSON object
// per line (docs/design/0019-fault-harness.md). For each it prints
// "<file> valid" or "<file> invalid".
//
// The model is the one the Rust checker uses: a register per key, empty
// (null) at first; read, write, and compare-and-set ([expected, new]).
// A failed operation never happened and says nothing (as in Jepsen);
// an operation of unknown outcome (info, or never completed) may take
// effect at any time after its invocation, or never (return time: the
// end of time); a read of unknown outcome says nothing.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/anishathalye/porcupine"
)

type record struct {
	Process int64           `json:"process"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Key     *uint64         `json:"key"`
	Value   json.RawMessage `json:"value"`
	Time    int64           `json:"time"`
}

type input struct {
	key      uint64
	f        string
	value    string // write: the value
	expected string // cas
	new      string // cas
}

type output struct {
	known bool
	value string // read: the value seen
	set   bool   // cas: whether it set
}

// canonical returns a JSON value as compact text, so equal values compare equal.
func canonical(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var value interface{}
	if err := json.Unmarshal(raw, &value); err != nil {
		return string(raw)
	}
	text, _ := json.Marshal(value)
	return string(text)
}

func casArguments(raw json.RawMessage) (string, string, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("a cas takes [expected, new]: %s", raw)
	}
	return canonical(pair[0]), canonical(pair[1]), nil
}

func operations(path string) ([]porcupine.Operation, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var records []record
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for scanner.Scan() {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			return nil, err
		}
		records = append(records, r)
	}
	open := map[int64]int{}
	var ops []porcupine.Operation
	for _, r := range records {
		key := uint64(0)
		if r.Key != nil {
			key = *r.Key
		}
		if r.Type == "invoke" {
			in := input{key: key, f: r.F}
			switch r.F {
			case "write":
				in.value = canonical(r.Value)
			case "cas":
				in.expected, in.new, err = casArguments(r.Value)
				if err != nil {
					return nil, err
				}
			}
			open[r.Process] = len(ops)
			ops = append(ops, porcupine.Operation{ClientId: int(r.Process), Input: in, Call: r.Time, Output: output{}, Return: math.MaxInt64})
			continue
		}
		index, found := open[r.Process]
		if !found {
			return nil, fmt.Errorf("process %d completes an operation it never invoked", r.Process)
		}
		delete(open, r.Process)
		switch r.Type {
		case "ok":
			ops[index].Return = r.Time
			out := output{known: true, set: true}
			if r.F == "read" {
				out.value = canonical(r.Value)
			}
			ops[index].Output = out
		case "fail":
			ops[index].Return = r.Time
			ops[index].Output = output{known: true, set: false}
		}
	}
	// Keep what the model can check: a failed operation never happened,
	// and a read of unknown outcome says nothing.
	var kept []porcupine.Operation
	for _, op := range ops {
		in := op.Input.(input)
		out := op.Output.(output)
		failed := out.known && !out.set
		if failed || (in.f == "read" && !out.known) {
			continue
		}
		kept = append(kept, op)
	}
	return kept, nil
}

var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[uint64][]porcupine.Operation{}
		var keys []uint64
		for _, op := range history {
			key := op.Input.(input).key
			if _, seen := byKey[key]; !seen {
				keys = append(keys, key)
			}
			byKey[key] = append(byKey[key], op)
		}
		var partitions [][]porcupine.Operation
		for _, key := range keys {
			partitions = append(partitions, byKey[key])
		}
		return partitions
	},
	Init: func() interface{} { return "null" },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		s := state.(string)
		i := in.(input)
		o := out.(output)
		switch i.f {
		case "read":
			return o.value == s, s
		case "write":
			return true, i.value
		case "cas":
			matches := i.expected == s
			switch {
			case !o.known && matches:
				return true, i.new
			case !o.known:
				return true, s
			default:
				return matches, i.new
			}
		}
		return false, s
	},
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
}

func main() {
	for _, path := range os.Args[1:] {
		history, err := operations(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		if porcupine.CheckOperations(model, history) {
			fmt.Printf("%s valid\n", path)
		} else {
			fmt.Printf("%s invalid\n", path)
		}
	}
}
