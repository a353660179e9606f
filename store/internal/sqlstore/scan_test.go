package sqlstore

import (
	"math"
	"testing"
)

func TestSumScanner(t *testing.T) {
	for _, tt := range []struct {
		in   any
		want int64
	}{
		{nil, 0},
		{int64(42), 42},
		{int64(-3), 0},
		{float64(12), 12},
		{1e19, math.MaxInt64},
		{float64(math.MaxInt64), math.MaxInt64},
		{-1e19, 0},
		{math.NaN(), 0},
		{math.Inf(1), math.MaxInt64},
		{"123", 123},
		{[]byte("18446744073709551614"), math.MaxInt64},
		{"-18446744073709551614", 0},
		{"1e400", math.MaxInt64},
		{"NaN", 0},
	} {
		var got int64 = -1
		if err := Sum(&got).Scan(tt.in); err != nil || got != tt.want {
			t.Errorf("Sum scan of %v (%T) = %d, %v; want %d", tt.in, tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []any{"many", true} {
		var got int64
		if err := Sum(&got).Scan(bad); err == nil {
			t.Errorf("Sum scan of %v: no error", bad)
		}
	}
}

func TestCostScanner(t *testing.T) {
	for _, tt := range []struct {
		in   any
		want float64
	}{
		{nil, 0},
		{0.25, 0.25},
		{-1.5, 0},
		{math.NaN(), 0},
		{math.Inf(1), math.MaxFloat64},
		{math.Inf(-1), 0},
		{int64(3), 3},
		{"Infinity", math.MaxFloat64},
		{[]byte("NaN"), 0},
		{"1e999", math.MaxFloat64},
		{"2.5", 2.5},
	} {
		got := -1.0
		if err := Cost(&got).Scan(tt.in); err != nil || got != tt.want {
			t.Errorf("Cost scan of %v (%T) = %v, %v; want %v", tt.in, tt.in, got, err, tt.want)
		}
	}
	var got float64
	if err := Cost(&got).Scan("cheap"); err == nil {
		t.Error("Cost scan of text: no error")
	}
}
