module github.com/loupe-dev/loupe

go 1.26
