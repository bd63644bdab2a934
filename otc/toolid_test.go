package otc

import (
	"reflect"
	"testing"
)

func TestParseToolID(t *testing.T) {
	tests := []struct {
		in      string
		want    ToolID
		wantErr bool
	}{
		{in: "Calculator.Add", want: ToolID{"Calculator", "Add", ""}},
		{in: "Calculator.Add@1", want: ToolID{"Calculator", "Add", "1"}},
		{in: "Calculator.Add@1.0.0", want: ToolID{"Calculator", "Add", "1.0.0"}},
		{in: "My_Kit9.Tool_2@10.20.30", want: ToolID{"My_Kit9", "Tool_2", "10.20.30"}},
		{in: "", wantErr: true},
		{in: "Calculator", wantErr: true},
		{in: "Calculator.", wantErr: true},
		{in: ".Add", wantErr: true},
		{in: "Calculator-Add", wantErr: true},
		{in: "Calc-ulator.Add", wantErr: true},
		{in: "Calculator.Add.More", wantErr: true},
		{in: "Calculator.Add@", wantErr: true},
		{in: "Calculator.Add@1.0", wantErr: true},
		{in: "Calculator.Add@1.0.0.0", wantErr: true},
		{in: "Calculator.Add@v1", wantErr: true},
		{in: "Calculator.Add@latest", wantErr: true},
		{in: "Calculator.Add@1.0.0 ", wantErr: true},
		{in: "Calculator.Ädd", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseToolID(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseToolID(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseToolID(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if !tt.wantErr && got.String() != tt.in {
			t.Errorf("ParseToolID(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestResolveVersion(t *testing.T) {
	available := []string{"1.0.0", "1.1.0", "0.9.0", "2.0.1", "10.0.0", "2.0.0"}
	tests := []struct {
		requested string
		want      string
		ok        bool
	}{
		{"", "10.0.0", true}, // numeric, not lexical, order
		{"1.0.0", "1.0.0", true},
		{"1.1.0", "1.1.0", true},
		{"1", "1.0.0", true},   // @x is exactly x.0.0 …
		{"2", "2.0.0", true},   // … not the latest 2.x
		{"10", "10.0.0", true}, //
		{"3", "", false},
		{"2.0.0", "2.0.0", true},
		{"1.2.0", "", false},
		{"01.0.0", "1.0.0", true}, // numeric comparison
		{"x", "", false},
		{"1.0", "", false},
	}
	for _, tt := range tests {
		got, ok := ResolveVersion(tt.requested, available)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ResolveVersion(%q) = %q, %v; want %q, %v", tt.requested, got, ok, tt.want, tt.ok)
		}
	}
	if v, ok := ResolveVersion("", nil); ok || v != "" {
		t.Errorf("ResolveVersion on no versions = %q, %v", v, ok)
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0},
		{"1.0.0", "1.0.1", -1},
		{"1.10.0", "1.9.0", 1},
		{"2.0.0", "10.0.0", -1},
		{"bad", "0.0.1", -1},
		{"0.0.1", "bad", 1},
		{"99999999999999999999999.0.0", "1.0.0", -1}, // overflow is not a version
	}
	for _, tt := range tests {
		if got := CompareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
