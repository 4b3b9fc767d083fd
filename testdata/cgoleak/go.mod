module cgoleak

go 1.19
