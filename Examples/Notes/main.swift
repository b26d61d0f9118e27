import AppRuntime
import Foundation

AppMain.run(delegate: NotesApp())
