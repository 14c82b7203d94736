from napkin.cli import main

main()
