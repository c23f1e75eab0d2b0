from fusiongen.cli import main

main()
