from .front.entry import main

main()
