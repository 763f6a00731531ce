package clockskew_test

import (
	"testing"

	"github.com/chronoq/chronoq/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
