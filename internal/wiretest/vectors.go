package wiretest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// Dialects are the file-name suffixes of dialect-specific OTC vectors:
// scenario.DIALECT.txtar, written once for each.
var Dialects = []string{"otc-1.0", "oxp-1.0", "oxp-flat"}

var scenarioName = regexp.MustCompile(`^[a-z0-9_]+$`)

// VectorName splits a vector's file name into its scenario and its
// dialect ("" when it is for every dialect).
func VectorName(file string) (scenario, dialect string, err error) {
	base, ok := strings.CutSuffix(file, ".txtar")
	if !ok {
		return "", "", errors.New("a vector's name ends in .txtar")
	}
	for _, d := range Dialects {
		if name, ok := strings.CutSuffix(base, "."+d); ok {
			base, dialect = name, d
			break
		}
	}
	if !scenarioName.MatchString(base) {
		return "", "", fmt.Errorf("name %q: want scenario.txtar or scenario.DIALECT.txtar with scenario in [a-z0-9_] and DIALECT one of %s", file, strings.Join(Dialects, ", "))
	}
	return base, dialect, nil
}

// Vector is a vector file parsed: its archive, its scenario and its
// dialect ("" for every dialect).
type Vector struct {
	Archive       *txtar.Archive
	Name, Dialect string
}

// ParseVector parses the vector file named file: the name must be a
// vector's (VectorName), and the comment must say what the scenario shows
// and which rule it covers (covers: "spec rule", "contract row"…).
func ParseVector(file string, data []byte, covers string) (*Vector, error) {
	name, dialect, err := VectorName(file)
	if err != nil {
		return nil, err
	}
	a := txtar.Parse(data)
	if len(bytes.TrimSpace(a.Comment)) == 0 {
		return nil, fmt.Errorf("no comment header: say what the scenario shows and which %s it covers", covers)
	}
	return &Vector{Archive: a, Name: name, Dialect: dialect}, nil
}

// LoadVector reads the vector at path and parses it with parse, the error
// naming path.
func LoadVector[T any](path string, parse func(file string, data []byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, err
	}
	v, err := parse(filepath.Base(path), data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// RunVectors runs each vector (*.txtar) of dir as a parallel subtest named
// after its file, failing when there is none, and checks that a dialect
// vector is there in every dialect.
func RunVectors(t *testing.T, dir string, run func(t *testing.T, path string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no vectors in %s", dir)
	}
	names := map[string]bool{}
	for _, f := range files {
		names[filepath.Base(f)] = true
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".txtar"), func(t *testing.T) {
			t.Parallel()
			if scenario, dialect, err := VectorName(name); err == nil && dialect != "" {
				for _, d := range Dialects {
					if sib := scenario + "." + d + ".txtar"; !names[sib] {
						t.Errorf("%s has no sibling %s: a dialect scenario is written in every dialect", name, sib)
					}
				}
			}
			run(t, f)
		})
	}
}

// MustLoadVector is LoadVector for a test: it fails t when the vector at
// path does not load.
func MustLoadVector[T any](t testing.TB, path string, parse func(file string, data []byte) (T, error)) T {
	t.Helper()
	v, err := LoadVector(path, parse)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// DecodeOptions decodes the options.json section of a vector strictly into
// v; i is its index among the archive's files, as it must come first.
func DecodeOptions(i int, data []byte, v any) error {
	if i != 0 {
		return errors.New("options.json must be the first section")
	}
	if err := DecodeStrict(data, v); err != nil {
		return fmt.Errorf("options.json: %w", err)
	}
	return nil
}
