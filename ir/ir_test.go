package ir

import "testing"

func TestMasqueradeMark(t *testing.T) {
	for bit, want := range map[int]string{14: "0x00004000", 0: "0x00000001", 31: "0x80000000", 20: "0x00100000"} {
		if got := (&ServiceMap{MasqueradeBit: bit}).MasqueradeMark(); got != want {
			t.Errorf("MasqueradeMark(%d) = %s, want %s", bit, got, want)
		}
	}
}
