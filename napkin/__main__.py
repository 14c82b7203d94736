from napkin._entry import main

main()
