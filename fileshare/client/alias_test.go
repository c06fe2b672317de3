package client

import "github.com/stabilizer/stabilizer/fileshare/client/shim/plan"

type planVersionID = plan.VersionID
