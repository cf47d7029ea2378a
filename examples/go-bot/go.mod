module example.com/taskzilla-go-bot

go 1.22
