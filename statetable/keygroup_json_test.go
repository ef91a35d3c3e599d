package statetable

import (
	"encoding/json"
	"testing"
)

// TestKeyGroupRange_JSON: a range is written snake_case and read back from
// that form and from the capitalised keys manifests held before it had
// tags.
func TestKeyGroupRange_JSON(t *testing.T) {
	b, err := json.Marshal(KeyGroupRange{First: 3, Last: 7})
	if err != nil || string(b) != `{"first":3,"last":7}` {
		t.Fatalf("Marshal: %s, %v; want {\"first\":3,\"last\":7}", b, err)
	}
	for _, in := range []string{`{"first":3,"last":7}`, `{"First":3,"Last":7}`} {
		var r KeyGroupRange
		if err := json.Unmarshal([]byte(in), &r); err != nil || r != (KeyGroupRange{3, 7}) {
			t.Errorf("Unmarshal(%s): %v, %v; want [3, 7]", in, r, err)
		}
	}
}
