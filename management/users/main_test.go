package users

import (
	"testing"

	"github.com/endcap/endcap/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
