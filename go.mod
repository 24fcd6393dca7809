module github.com/meshless/meshless

go 1.25.0

require go.uber.org/goleak v1.1.10

require (
	golang.org/x/lint v0.0.0-20190930215403-16217165b5de // indirect
	golang.org/x/tools v0.0.0-20191108193012-7d206e10da11 // indirect
)
